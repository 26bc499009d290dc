-- batch.lua: the script's body, run. It carries out groups of operations,
-- each group all or nothing, the groups one after another, and writes
-- every changed key at the end, with an expiry at the instant its state
-- drains. script.go makes it a script (EVAL) or a Redis Function library.
--
-- ARGV: MODE ('s': Redis's clock, 'c': each op's own time) MINTTL_MS
--   NPOLICIES, then for each a policy 'ALG LIMIT PERIOD BURST', then OPS,
--   the groups packed in one string (struct.pack's format in brackets):
--   NGROUPS [<I4], then for each group NOPS [<I4] and for each op KIND
--   KEYINDEX POLICYINDEX NOW_S NOW_NS N [<BI4I4ddd], where the op's time
--   is NOW_S*10^9 + NOW_NS ns; then MAXWAIT for a schedule (kind 2) in
--   decimal [<s], and AT_S AT_NS TAT_S TAT_NS FRAC (its stamp) for a
--   refund (kind 3) [<ddddd]. Unpacking one string is cheaper for Redis
--   and the client than an argument per number.
-- On a Redis Cluster, the keys of a call may span hash slots of the master
--   it runs on (the function's flag allow-cross-slot-keys): KEYS[1] then
--   only routes the call, and OPS is followed by RUNS, how many keys each
--   slot has, one after another [<I4 each], and the keys, grouped by slot,
--   which KEYINDEX counts. Every key is read before any is written, so a
--   key that is not the node's fails the call at a read, having changed
--   nothing ("non local key").
-- A call of one decision (kind 1) alone, the commonest, may instead come
--   in a short form, which one reads: 'S' POLICY N on Redis's clock, or
--   'C' MINTTL_MS POLICY N NOW_S NOW_NS on the caller's, then 'M' for the
--   CONVERT flag of a policy change (see below).
-- The reply is one string of little-endian IEEE 754 doubles, every one an
--   integer: the time used in server mode as S NS (0 0 in caller mode),
--   then for each op CODE REMAINING RETRY RESET AT-NOW TAT-NOW FRAC: CODE
--   1 admitted, 0 denied, 2 denied for a cost above the burst, 3 not
--   carried out for a policy change (MISSED, see below); durations
--   in ns, RETRY -1 for never, and -2 for a duration past 2^53, which a
--   double cannot hold: it is the next of the decimal numbers, separated
--   by spaces, that follow the doubles. An admitted event's stamp is AT
--   (NOW + AT-NOW), and for a bucket TAT (NOW + TAT-NOW) and FRAC. One
--   string costs Redis and the client far less than a table of numbers.

local TOKEN, LEAKY, LOG, SLIDING, FIXED = 1, 2, 3, 4, 5
local MAXH, MAXL = 4611686018, 427387904 -- algo.MaxTime = 2^62 ns
local MS = 1000000

local function clone(s)
  local c = {}
  for k, v in pairs(s) do c[k] = v end
  if s.ov then
    c.ov = {}
    for k, v in pairs(s.ov) do c.ov[k] = v end
  end
  return c
end

-- A bucket's or window's state is a string of 33 bytes: ALG as a byte,
-- then T's seconds and nanoseconds, X and Y as doubles (little-endian
-- IEEE 754), every one an integer below 2^53. Redis's struct library packs
-- and unpacks it in C, far faster than Lua formats and parses decimals.
local STATE, STATELEN = '<Bdddd', 33
-- struct.pack and struct.unpack, which run sets (see floor).
local spack, sunpack

-- parseState returns the numbers of a bucket's or window's value v: ALG,
-- TH, TL, X, Y, or nil for anything else, which the store did not write:
-- another length, NaNs, fractions, negatives.
local function parseState(v)
  if #v ~= STATELEN then return nil end
  local a, th, tl, x, y = sunpack(STATE, v)
  if a < TOKEN or a > FIXED or not (th >= 0 and tl >= 0 and tl < G and x >= 0 and y >= 0 and
      th % 1 == 0 and tl % 1 == 0 and x % 1 == 0 and y % 1 == 0) then
    return nil
  end
  return a, th, tl, x, y
end

-- load reads key's state; v is its string value, read beforehand.
local function load(key, p, v)
  if p.alg == LOG then
    local v = redis.call('HMGET', key, 'h', 'c', 'u')
    if not v[1] then return {key = key, head = 0, c = 0, u = 0, ov = {}, base = {}} end
    return {key = key, head = tonumber(v[1]), c = tonumber(v[2]), u = tonumber(v[3]), ov = {}, base = {}}
  end
  if v then
    local a, th, tl, x, y = parseState(v)
    if a == nil then error('floodgate: corrupt state at ' .. key) end
    -- The state as read (o...), for commit to see whether its expiry moved.
    return {alg = a, th = th, tl = tl, x = x, y = y, oalg = a, oth = th, otl = tl, ox = x, oy = y}
  end
  return {alg = 0, th = 0, tl = 0, x = 0, y = 0}
end

-- A policy change (policychange.go): a decision or schedule on a table
-- whose name had other policies carries a flag in its KIND. CONVERT: when
-- Redis does not hold its key, the op's group is not carried out, and each
-- of its ops replies with code 3 (MISSED), for the store to work out the
-- key's state under the former policies. SEEDED: the op carries that
-- state, SEED, after N: ALG [<B], then for a log C [<I4] and C entries TH
-- TL N [<ddd each], else TH TL X Y [<dddd]. A key Redis does not hold
-- starts from it, written even when the op changes nothing; a key it holds
-- keeps its own.
local CONVERT, SEEDED, MISSED = 16, 32, 3

-- readSeed reads an op's SEED at pos, for key: its state (nil for the
-- initial state) and the position after it.
local function readSeed(key, ops, pos)
  local a
  a, pos = sunpack('<B', ops, pos)
  if a == LOG then
    local c
    c, pos = sunpack('<I4', ops, pos)
    local s = {key = key, head = 0, c = 0, u = 0, ov = {}, base = {}}
    for _ = 1, c do
      local th, tl, n
      th, tl, n, pos = sunpack('<ddd', ops, pos)
      logPush(s, th, tl, n)
    end
    if c == 0 then s = nil end
    return s, pos
  end
  local th, tl, x, y
  th, tl, x, y, pos = sunpack('<dddd', ops, pos)
  if a == 0 then return nil, pos end
  return {alg = a, th = th, tl = tl, x = x, y = y}, pos
end

-- held reports whether Redis holds key, whose string value v was read
-- beforehand (false for a log's hash): for a log it loads the state,
-- returned when held, which a stored log never is without entries.
local function held(p, key, v)
  if p.alg ~= LOG then return v and true or false, nil end
  local s = load(key, p, v)
  if s.c == 0 then return false, nil end
  return true, s
end

-- skipOp returns the position after the fields of an op of kind that
-- follow N (see above): for an op not carried out.
local function skipOp(kind, ops, pos)
  if kind == 2 then
    local _
    _, pos = sunpack('<s', ops, pos)
  elseif kind == 3 then
    pos = pos + 40
  end
  return pos
end

local function initial(p, s)
  if p.alg == LOG then
    logDrop(s, s.c, s.u)
  else
    s.alg, s.th, s.tl, s.x, s.y = p.alg, 0, 0, 0, 0
  end
end

local function algorithm(p, s, nh, nl, n)
  local a = p.alg
  if a == TOKEN or a == LEAKY then return bucket(p, s, nh, nl, n) end
  if a == LOG then return slidingLog(p, s, nh, nl, n) end
  if a == SLIDING then return slidingWindow(p, s, nh, nl, n) end
  return fixedWindow(p, s, nh, nl, n)
end

-- decide is algo.Policy.Decide: it changes s only when it admits.
local function decide(p, s, nh, nl, n)
  if p.alg ~= LOG and s.alg ~= p.alg then
    if n == 0 or n > p.burst then
      s = {alg = p.alg, th = 0, tl = 0, x = 0, y = 0}
    else
      initial(p, s)
    end
  end
  if n > p.burst then
    local _, rem, _, reset = algorithm(p, s, nh, nl, 0)
    return false, rem, nil, reset, 1
  end
  local ok, rem, retry, reset = algorithm(p, s, nh, nl, n)
  return ok, rem, retry, reset, 0
end

-- stampAt returns the instant an event admitted at (h, l) counts from
-- (algo.Policy.StampOf).
local function stampAt(p, s, h, l)
  local th, tl
  if p.alg == LOG then
    if s.c == 0 then return h, l end
    local last = logEntry(s, s.c - 1)
    th, tl = last.th, last.tl
  elseif p.alg == SLIDING or p.alg == FIXED then
    th, tl = s.th, s.tl
  else
    return h, l
  end
  if pcmp(th, tl, h, l) > 0 then return th, tl end
  return h, l
end

local function refund(p, s, st, nh, nl, n)
  if n == 0 then return end
  local a = p.alg
  if a == LOG then
    logTake(s, st.ah, st.al, n)
    return
  end
  if s.alg ~= a then return end
  if a == TOKEN or a == LEAKY then
    refundBucket(p, s, st, nh, nl, n)
    return
  end
  -- The window holding the stamp's instant.
  local at = pbig(st.ah, st.al)
  local wh, wl = bigp(sub(at, mod(at, p.period)))
  if wh == s.th and wl == s.tl then
    local k = n
    if s.x < k then k = s.x end
    s.x = s.x - k
  elseif a == SLIDING and cmp(add(pbig(wh, wl), p.period), pbig(s.th, s.tl)) == 0 then
    local k = n
    if s.y < k then k = s.y end
    s.y = s.y - k
  end
end

-- plus returns (h, l) + d for a duration d, a double or a big.
local function plus(h, l, d)
  if type(d) == 'table' or d >= TWO53 - G then return bigp(add(pbig(h, l), dbig(d))) end
  return pnorm(h, l + d)
end

-- resetAt is algo.Policy.ResetAt: nil when s is the initial state.
local function resetAt(p, s)
  local a = p.alg
  if a == LOG then
    if s.c == 0 then return nil end
    local last = logEntry(s, s.c - 1)
    return pnorm(last.th + p.ph, last.tl + p.pl)
  end
  if s.alg ~= a then return nil end
  if a == TOKEN or a == LEAKY then
    if s.x > 0 then return pnorm(s.th, s.tl + 1) end
    if s.th == 0 and s.tl == 0 then return nil end
    return s.th, s.tl
  end
  local span = p.pn or p.period
  if a == SLIDING then
    if s.x > 0 then
      if p.pn then return pnorm(s.th, s.tl + 2 * p.pn) end
      return plus(s.th, s.tl, add(p.period, p.period))
    end
    if s.y > 0 then return plus(s.th, s.tl, span) end
    return nil
  end
  if s.x > 0 then
    if p.pg and not p.pn then return s.th + p.pg, s.tl end -- a long window
    return plus(s.th, s.tl, span)
  end
  return nil
end

-- settle forgets s when it has drained at now, as the memory store drops
-- such a state: after that, even an earlier time finds the key afresh. It
-- reports whether it forgot anything.
local function settle(p, s, nh, nl)
  local rh, rl = resetAt(p, s)
  if rh ~= nil and pcmp(rh, rl, nh, nl) > 0 then return false end
  if p.alg == LOG then
    if s.c == 0 then return false end
  elseif s.alg == p.alg and s.th == 0 and s.tl == 0 and s.x == 0 and s.y == 0 then
    return false
  end
  initial(p, s)
  return true
end

-- admitted finishes an op that admitted n at (ah, al), deciding at
-- (nh, nl) after waiting wait: it returns whether s changed, and the
-- reply's AT-NOW, TAT-NOW and FRAC.
local function admitted(p, s, n, nh, nl, ah, al, wait)
  if n > 0 and (p.alg == TOKEN or p.alg == LEAKY) then
    -- The event counts from (ah, al), and the TAT it leaves is after now,
    -- so the key has not drained: nothing to settle.
    return true, wait, pdiff(s.th, s.tl, nh, nl) or sub(pbig(s.th, s.tl), pbig(nh, nl)), s.x
  end
  if n > 0 then
    local sh, sl = stampAt(p, s, ah, al)
    if type(wait) ~= 'table' and wait == 0 then
      -- AT - now: the event counts from a later instant than now when the
      -- clock stepped back.
      wait = pdiff(sh, sl, nh, nl) or pdur(pnorm(sh - nh, sl - nl))
    end
    -- The units just admitted count until after now: nothing to settle.
    return true, wait, 0, 0
  end
  return settle(p, s, nh, nl), wait, 0, 0
end

-- The durations past 2^53 of the reply being built (see above): a
-- call's Lua runs alone, so one list serves every call.
local bigs, nbig = {}, 0

-- out turns a duration into a reply value.
local function out(d)
  if d == nil then return -1 end
  if type(d) == 'table' then
    if d[4] == 0 and d[5] == 0 and d[6] == 0 and d[3] < 8000 then return tonum(d) end
    nbig = nbig + 1
    bigs[nbig] = str(d)
    return -2
  end
  return d
end

-- finish returns the reply: r, the packed doubles, then the durations
-- set aside by out.
local function finish(r)
  if nbig > 0 then r = r .. table.concat(bigs, ' ', 1, nbig) end
  return r
end

-- periodIn sets p's PERIOD in ns as a double, pn, and how phase takes
-- it: modk 1 when it divides 10^9, 2 when 10^9 divides it (pg seconds).
local function periodIn(p, pn)
  p.pn = pn
  if G % pn == 0 then
    p.modk = 1
  elseif pn % G == 0 then
    p.modk, p.pg = 2, pn / G
  end
end

-- parsePolicy reads a policy, "ALG LIMIT PERIOD BURST", and works out
-- what its fast paths need: a bucket's narrow one when tau fits in 2^50
-- units, and its wide one when LIMIT and burst are at most 2^32.
local function parsePolicy(w)
  local a, l, per, b = string.match(w, '^(%d) (%d+) (%d+) (%d+)$')
  if a == nil then error('floodgate: bad policy ' .. w) end
  local p = {alg = tonumber(a), limit = tonumber(l), period = big(per), burst = tonumber(b)}
  p.bp = mulnum(p.period, p.burst)
  p.ph, p.pl = bigp(p.period)
  local pn, bpn = tonum(p.period), tonum(p.bp)
  if pn <= FAST then
    -- PERIOD small: a fixed window's and a log's fast paths need no more.
    periodIn(p, pn)
    p.quick = p.alg == FIXED
    if bpn <= FAST then
      -- PERIOD*BURST small too: the buckets' and sliding window's.
      p.fast, p.bpn = true, bpn
      p.dmax = floor(4 * FAST / p.limit)
      p.quick = p.quick or p.alg == TOKEN or p.alg == LEAKY
    end
  end
  if p.alg == SLIDING and (p.fast or (p.limit <= SMALLD and pn <= WIDEP)) then
    periodIn(p, pn)
    p.sw, p.quick = true, true
  elseif pn > FAST and p.alg == FIXED then
    -- PERIOD long: a fixed window's long path, for whole seconds.
    local q, r = divsmall(p.period, G)
    if r == 0 then p.pg, p.quick = tonum(q), true end
  end
  if (p.alg == TOKEN or p.alg == LEAKY) and p.limit <= SMALLD and p.burst <= SMALLD then
    p.wide, p.quick = true, true
  end
  return p
end

-- Parsed policies, kept between calls when the script is loaded as a
-- Redis Function (a library's locals live as long as the library); a
-- policy is a constant, so keeping it changes no decision. At most
-- MAXPOLICIES are kept.
local MAXPOLICIES = 1024
local policyCache, policyCount = {}, 0

local function policy(w)
  local p = policyCache[w]
  if p == nil then
    p = parsePolicy(w)
    if policyCount >= MAXPOLICIES then policyCache, policyCount = {}, 0 end
    policyCache[w], policyCount = p, policyCount + 1
  end
  return p
end

-- OLD is a scratch state, for commit.
local OLD = {}

-- commit writes state s of key, changed at (nh, nl) = (s.lh, s.ll), with
-- its expiry, or deletes the key once s has drained.
local function commit(key, s, mode, minTTL)
  local p, nh, nl = s.p, s.lh, s.ll
  local rh, rl = resetAt(p, s)
  if rh == nil or pcmp(rh, rl, nh, nl) <= 0 then
    redis.call('DEL', key)
  else
    local ms, cmd
    if mode == 's' then
      ms, cmd = rh * 1000 + ceil(rl / MS), 'PXAT'
    else
      local d = pdiff(rh, rl, nh, nl)
      if d then
        ms = ceil(d / MS)
      else
        ms = tonum(ceildivnum(sub(pbig(rh, rl), pbig(nh, nl)), MS))
      end
      if ms < minTTL then ms = minTTL end
      cmd = 'PX'
    end
    if p.alg == LOG then
      local set, del = {'h', string.format('%d', s.head), 'c', string.format('%d', s.c), 'u', string.format('%d', s.u)}, {}
      for idx, e in pairs(s.ov) do
        local f = string.format('%d', idx)
        if e and idx >= s.head and idx < s.head + s.c then
          set[#set + 1] = f
          set[#set + 1] = pstr(e.th, e.tl) .. ' ' .. string.format('%d', e.n)
        else
          del[#del + 1] = f
        end
      end
      if #del > 0 then redis.call('HDEL', key, unpack(del)) end
      redis.call('HSET', key, unpack(set))
      redis.call(cmd == 'PXAT' and 'PEXPIREAT' or 'PEXPIRE', key, string.format('%d', ms))
    else
      local v = spack(STATE, p.alg, s.th, s.tl, s.x, s.y)
      if mode == 's' and s.oalg then
        -- The key held a state: when that one drained at this instant too
        -- (a window's count went up), its expiry stands, and KEEPTTL
        -- spares Redis setting it again.
        OLD.alg, OLD.th, OLD.tl, OLD.x, OLD.y = s.oalg, s.oth, s.otl, s.ox, s.oy
        local oh, ol = resetAt(p, OLD)
        if oh == rh and ol == rl then
          redis.call('SET', key, v, 'KEEPTTL')
          return
        end
      end
      redis.call('SET', key, v, cmd, string.format('%d', ms))
    end
  end
end

-- touch marks state s, of key index k, changed at (nh, nl): at once in a
-- group of one op (which changes nothing unless carried out), else in
-- changes, the group's, which count once the group is carried out.
local function touch(changes, s, k, nh, nl)
  if changes == nil then
    s.dirty, s.lh, s.ll = true, nh, nl
    return
  end
  local n = changes.n + 1
  changes.n, changes.k[n], changes.h[n], changes.l[n] = n, k, nh, nl
end

-- SMALL maps the decimal strings of 0 to 1023 to their numbers, which run
-- fills; int reads an argument through it, faster than tonumber for the
-- usually small ones (counts, indexes, kinds, costs).
local SMALL = {}
local function int(v) return SMALL[v] or tonumber(v) end

-- put packs an op's seven reply values.
local OPREPLY = '<ddddddd'
local function put(ok, err, rem, retry, reset, wait, tat, frac)
  local code = ok and 1 or 0
  if err == 1 then code = 2 end
  -- One at a time, so that bigs keeps their order; a number is itself.
  if type(retry) ~= 'number' then retry = out(retry) end
  if type(reset) ~= 'number' then reset = out(reset) end
  if type(wait) ~= 'number' then wait = out(wait) end
  if type(tat) ~= 'number' then tat = out(tat) end
  return spack(OPREPLY, code, rem, retry, reset, wait, tat, frac)
end

-- KEEP, as an expiry in quick's expiries: the key keeps the expiry Redis
-- holds for it (SET KEEPTTL).
local KEEP = false

-- quick decides an op of kind 1, alone in its group, for a key that no op
-- of the call has loaded as a state (see run), exactly as decide,
-- admitted and commit would: v is the key's value, from this call's
-- writes or Redis. It works in locals, without a state table, and returns
-- the op's reply, or nil, having changed nothing, for an op the general
-- path must take: a policy other than a bucket or a fixed or sliding
-- window with a fast path (p.quick), a cost of 0 or above the burst, a value of another
-- algorithm or a corrupt one, a state far from now. An admitted op's new
-- value goes in values[k] and its expiry in expiries[k], for run to write
-- at the end. Nearly every decision of a busy store is one of these, and
-- costs Redis less here than on the general path, without its tables (the
-- README's "On Redis" has the figures).
local function quick(p, v, nh, nl, n, k, values, expiries, mode, minTTL)
  if not p.quick or n <= 0 or n > p.burst then return nil end
  local th, tl, x, y = 0, 0, 0, 0
  if v then
    local a
    a, th, tl, x, y = parseState(v)
    if a ~= p.alg then return nil end
  end
  local keep, rh, rl, reply -- keep: the expiry stands; rh, rl: resetAt
  if p.alg == FIXED or p.alg == SLIDING then
    local ok, rem, retry, reset, sh, sl, count, prev = windowFast(p, th, tl, x, y, nh, nl, n)
    if ok == nil then return nil end
    -- A long window's durations past 2^53 are bigs (see bucketFast's).
    if type(retry) ~= 'number' then retry = out(retry) end
    if type(reset) ~= 'number' then reset = out(reset) end
    if not ok then return spack(OPREPLY, 0, rem, retry, reset, 0, 0, 0) end
    -- The count went up in the window whose expiry Redis holds.
    keep = mode == 's' and x > 0 and sh == th and sl == tl and (expiries[k] == nil or expiries[k] == KEEP)
    th, tl, x, y = sh, sl, count + n, prev
    if p.alg == SLIDING then
      rh, rl = pnorm(th, tl + 2 * p.pn)
    elseif p.pn then
      rh, rl = pnorm(th, tl + p.pn)
    else
      rh, rl = th + p.pg, tl
    end
    -- AT - now: the window's start, when the clock stepped back behind it.
    local at = 0
    if pcmp(th, tl, nh, nl) > 0 then at = pdiff(th, tl, nh, nl) or out(pdur(pnorm(th - nh, tl - nl))) end
    reply = spack(OPREPLY, 1, rem, 0, reset, at, 0, 0)
  else
    local ok, rem, retry, reset, h, l, f = bucketFast(p, th, tl, x, nh, nl, n)
    if ok == nil then return nil end
    -- A wide policy's durations past 2^53 are bigs: out sets them aside
    -- in the reply's order, which is the order of the calls to out.
    if type(retry) ~= 'number' then retry = out(retry) end
    if type(reset) ~= 'number' then reset = out(reset) end
    if not ok then return spack(OPREPLY, 0, rem, retry, reset, 0, 0, 0) end
    th, tl, x = h, l, f
    -- TAT, or 1 ns after it with a fraction: after now.
    rh, rl = th, tl
    if x > 0 then rh, rl = pnorm(th, tl + 1) end
    local tat = pdiff(th, tl, nh, nl) or out(pdur(pnorm(th - nh, tl - nl)))
    reply = spack(OPREPLY, 1, rem, 0, reset, 0, tat, x)
  end
  local ms
  if keep then
    ms = KEEP
  elseif mode == 's' then
    ms = rh * 1000 + ceil(rl / MS)
  else
    -- ceil((resetAt - now)/1ms), resetAt being after now.
    local dh, dl = pnorm(rh - nh, rl - nl)
    ms = dh * 1000 + ceil(dl / MS)
    if ms < minTTL then ms = minTTL end
  end
  values[k], expiries[k] = spack(STATE, p.alg, th, tl, x, y), ms
  return reply
end

-- write sets key to v, with expiry ms (see quick). The keys of a call
-- often share their expiry: its decimal form is kept for the next.
local lastMS, lastText
local function write(key, v, mode, ms)
  if ms == KEEP then
    redis.call('SET', key, v, 'KEEPTTL')
    return
  end
  if ms ~= lastMS then lastMS, lastText = ms, string.format('%d', ms) end
  redis.call('SET', key, v, mode == 's' and 'PXAT' or 'PX', lastText)
end

-- one carries out a call in the short form (see above), deciding exactly
-- as run does, with less work: Redis runs a script's Lua in one thread, so
-- every call it saves is time for other clients' commands.
local ONEREPLY = '<ddddddddd'
-- quick's values and expiries, for one: one op, one key.
local ONEVAL, ONEEXP = {}, {}
-- OP is an op's packed fields (see above).
local OP = '<BI4I4ddd'
local function one(KEYS, ARGV)
  local key = KEYS[1]
  local mode, minTTL, p, n, nh, nl, sh, sl -- sh, sl: Redis's clock, for the reply
  local convert -- the op's CONVERT flag, 'M' (see above)
  if ARGV[1] == 'S' then
    mode, minTTL, p, n, convert = 's', 0, policy(ARGV[2]), int(ARGV[3]), ARGV[4]
    local t = redis.call('TIME')
    nh, nl = tonumber(t[1]), tonumber(t[2]) * 1000
    sh, sl = nh, nl
  else
    mode, minTTL, p, n, convert = 'c', int(ARGV[2]), policy(ARGV[3]), int(ARGV[4]), ARGV[7]
    nh, nl = tonumber(ARGV[5]), tonumber(ARGV[6])
    sh, sl = 0, 0
  end
  local v, s
  if p.alg ~= LOG then v = redis.call('MGET', key)[1] end
  if convert then
    local ok
    ok, s = held(p, key, v)
    if not ok then return spack('<dd', sh, sl) .. spack(OPREPLY, MISSED, 0, 0, 0, 0, 0, 0) end
  end
  ONEVAL[1], ONEEXP[1] = nil, nil
  local part = quick(p, v, nh, nl, n, 1, ONEVAL, ONEEXP, mode, minTTL)
  if part then
    if ONEVAL[1] then write(key, ONEVAL[1], mode, ONEEXP[1]) end
    return finish(spack('<dd', sh, sl) .. part)
  end
  s = s or load(key, p, v)
  s.p = p
  local ok, rem, retry, reset, err = decide(p, s, nh, nl, n)
  local code, wait, tat, frac = 0, 0, 0, 0
  if ok then
    local changed
    code = 1
    changed, wait, tat, frac = admitted(p, s, n, nh, nl, nh, nl, 0)
    if changed then
      s.lh, s.ll = nh, nl
      commit(key, s, mode, minTTL)
    end
  elseif err == 1 then
    code = 2
  end
  retry = out(retry)
  reset = out(reset)
  wait = out(wait)
  tat = out(tat)
  return finish(spack(ONEREPLY, sh, sl, code, rem, retry, reset, wait, tat, frac))
end

-- mget reads the string values of keys[from..to], which share a hash
-- slot on a Redis Cluster, into values (false for a sliding-log's hash),
-- in MGETs of up to 1000 keys, and returns values.
local function mget(keys, from, to, values)
  for j = from, to, 1000 do
    local v = redis.call('MGET', unpack(keys, j, math.min(j + 999, to)))
    for m = 1, #v do values[j + m - 1] = v[m] end
  end
  return values
end

-- slotKeys returns the keys of a call across hash slots, RUNS and the
-- keys in ARGV from index at (see above), and their string values, read
-- slot by slot: a command's keys must still share a slot.
local function slotKeys(ARGV, at)
  local runs, keys, values = ARGV[at], {}, {}
  for k = at + 1, #ARGV do keys[k - at] = ARGV[k] end
  local from = 1
  for r = 1, #runs, 4 do
    local n = sunpack('<I4', runs, r)
    mget(keys, from, from + n - 1, values)
    from = from + n
  end
  return keys, values
end

-- run carries out one call of the script: KEYS and ARGV as above, in
-- any form.
local function run(KEYS, ARGV)
  if floor == nil then
    floor, ceil, spack, sunpack = math.floor, math.ceil, struct.pack, struct.unpack
    for v = 0, 1023 do SMALL[tostring(v)] = v end
  end
  nbig = 0
  if ARGV[1] == 'S' or ARGV[1] == 'C' then return one(KEYS, ARGV) end
  local mode, minTTL = ARGV[1], int(ARGV[2])
  local i = 3
  local policies = {}
  local np = int(ARGV[i])
  for k = 1, np do policies[k] = policy(ARGV[i + k]) end
  i = i + np + 1

  local serverH, serverL
  local reply = {} -- packed doubles: the time, then each op's
  if mode == 's' then
    local t = redis.call('TIME')
    serverH, serverL = tonumber(t[1]), tonumber(t[2]) * 1000
    reply[1] = spack('<dd', serverH, serverL)
  else
    reply[1] = spack('<dd', 0, 0)
  end

  local ops, pos = ARGV[i], 1
  local keys, values = KEYS, nil
  if #ARGV > i then
    keys, values = slotKeys(ARGV, i + 1)
  elseif #keys <= 1000 then
    values = redis.call('MGET', unpack(keys))
  else
    values = mget(keys, 1, #keys, {})
  end

  local states = {} -- key index -> state, loaded when first needed
  -- key index -> expiry of the value that quick left in values
  local expiries = {}
  local multi -- the changes of a group of several ops (see touch)
  local nr = 1 -- reply parts so far

  local ngroups
  ngroups, pos = sunpack('<I4', ops, pos)
  for _ = 1, ngroups do
    local nops
    nops, pos = sunpack('<I4', ops, pos)
    local undo, denied, changes = nil, false, nil
    local missed, first = false, nr -- first: the reply parts before the group's
    if nops > 1 then
      undo = {}
      multi = multi or {k = {}, h = {}, l = {}}
      multi.n, changes = 0, multi
    end
    for o = 1, nops do
      local kind, k, pi, ts, tns, n
      kind, k, pi, ts, tns, n, pos = sunpack(OP, ops, pos)
      local flag, seed = 0, nil
      if kind > 15 then
        flag = kind - kind % 16
        kind = kind - flag
        if flag == SEEDED then seed, pos = readSeed(keys[k], ops, pos) end
      end
      local p = policies[pi]
      local nh, nl = serverH, serverL
      if nh == nil then nh, nl = ts, tns end
      local s = states[k]
      if s == nil and flag ~= 0 and not missed then
        local ok
        ok, s = held(p, keys[k], values[k])
        if not ok and flag == CONVERT then
          missed = true
        elseif not ok and seed then
          s, seed.dirty, seed.lh, seed.ll = seed, true, nh, nl
        end
        if s then s.p, states[k] = p, s end
      end
      local part
      if missed then
        pos = skipOp(kind, ops, pos)
      elseif s == nil and nops == 1 and kind == 1 then
        part = quick(p, values[k], nh, nl, n, k, values, expiries, mode, minTTL)
      end
      if missed then
        nr = nr + 1
        reply[nr] = spack(OPREPLY, MISSED, 0, 0, 0, 0, 0, 0)
      elseif part then
        nr = nr + 1
        reply[nr] = part
      else
        if s == nil then
          s = load(keys[k], p, values[k])
          s.p = p
          -- Redis's expiry for it is not that of the value quick left.
          if expiries[k] ~= nil then s.oalg = nil end
          states[k] = s
        end
        if undo and undo[k] == nil then undo[k] = clone(s) end
        local ok, rem, retry, reset, err = false, 0, 0, 0, 0
        local ah, al, wait = nh, nl, 0
        local tat, frac = 0, 0
        if kind == 1 or kind == 2 then
          ok, rem, retry, reset, err = decide(p, s, nh, nl, n)
          if kind == 2 then
            local maxWait
            maxWait, pos = sunpack('<s', ops, pos)
            if not ok and err == 0 and (p.alg == TOKEN or p.alg == LEAKY) then
              local fits
              if type(retry) == 'table' then
                fits = cmp(retry, big(maxWait)) <= 0
              else
                fits = retry <= tonumber(maxWait)
              end
              if fits then
                local xh, xl = plus(nh, nl, retry)
                if pcmp(xh, xl, MAXH, MAXL) <= 0 then
                  wait, ah, al = retry, xh, xl
                  ok, rem, retry, reset, err = decide(p, s, ah, al, n)
                  if not ok then error('floodgate: scheduled event not admitted') end
                  retry, rem = wait, 0
                  if type(reset) == 'table' or type(wait) == 'table' or reset + wait >= TWO53 then
                    reset = add(dbig(reset), dbig(wait))
                  else
                    reset = reset + wait
                  end
                end
              end
            end
          end
          if not ok then
            denied = true
          else
            local changed
            changed, wait, tat, frac = admitted(p, s, n, nh, nl, ah, al, wait)
            if changed then touch(changes, s, k, nh, nl) end
          end
        elseif kind == 3 then
          local st = {}
          st.ah, st.al, st.th, st.tl, st.frac, pos = sunpack('<ddddd', ops, pos)
          refund(p, s, st, nh, nl, n)
          settle(p, s, nh, nl)
          touch(changes, s, k, nh, nl)
        else
          initial(p, s)
          touch(changes, s, k, nh, nl)
        end
        nr = nr + 1
        reply[nr] = put(ok, err, rem, retry, reset, wait, tat, frac)
      end
    end
    if missed then
      -- Not carried out: none of the group's ops.
      for j = first + 1, nr do reply[j] = spack(OPREPLY, MISSED, 0, 0, 0, 0, 0, 0) end
      denied = true
    end
    if denied and undo then
      for k, s in pairs(undo) do states[k] = s end
    elseif changes and not denied then
      for j = 1, changes.n do
        local s = states[changes.k[j]]
        s.dirty, s.lh, s.ll = true, changes.h[j], changes.l[j]
      end
    end
  end

  -- Write each changed key, or delete it once its state has drained.
  for k, s in pairs(states) do
    if s.dirty then commit(keys[k], s, mode, minTTL) end
  end
  -- and each that only quick changed.
  for k, ms in pairs(expiries) do
    local s = states[k]
    if not (s and s.dirty) then write(keys[k], values[k], mode, ms) end
  end
  return finish(table.concat(reply, '', 1, nr))
end
