-- window.lua: fixed-window and sliding-window, exactly as
-- algo.Policy.fixedWindow and slidingWindow. The current window starts at
-- (s.th, s.tl) and holds s.x units; the previous one held s.y. The fast
-- paths work in doubles relative to the window's start: a fixed window's
-- when PERIOD is at most 2^50, a sliding window's when LIMIT*PERIOD is
-- too, or LIMIT is at most 2^32 and PERIOD at most WIDEP. The exact ones
-- work on big integers.

-- phase returns now mod PERIOD, exactly.
local function phase(p, nh, nl)
  if p.modk == 1 then return nl % p.pn end -- PERIOD divides 10^9
  if p.modk == 2 then return (nh % p.pg) * G + nl end -- 10^9 divides PERIOD
  return tonum(mod(pbig(nh, nl), p.period))
end

-- windowExact converts to big integers, runs fn (fixedExact or
-- slidingExact) and converts back.
local function windowExact(fn, p, s, nh, nl, n)
  local b = {t = pbig(s.th, s.tl), x = s.x, y = s.y}
  local ok, rem, retry, reset = fn(p, b, pbig(nh, nl), n)
  if ok and n > 0 then
    s.th, s.tl = bigp(b.t)
    s.x, s.y = b.x, b.y
  end
  return ok, rem, retry, reset
end

-- fixedOutcome decides n units on a window holding count that ends in
-- untilEnd, for both paths; the caller stores the state when it admits.
local function fixedOutcome(p, count, n, untilEnd)
  if n > 0 and count + n <= p.limit then
    return true, p.limit - count - n, 0, untilEnd
  end
  local rem, reset, retry = p.limit - count, 0, 0
  if rem < 0 then rem = 0 end
  if count > 0 then reset = untilEnd end
  if n > 0 then retry = untilEnd end
  return n == 0, rem, retry, reset
end

local function fixedExact(p, s, now, n)
  local start = sub(now, mod(now, p.period))
  local count = 0
  local c = cmp(start, s.t)
  if c == 0 then
    count = s.x
  elseif c < 0 then -- the clock stepped back: stay in the stored window
    start, count = s.t, s.x
  end
  local ok, rem, retry, reset = fixedOutcome(p, count, n, sub(add(start, p.period), now))
  if ok and n > 0 then s.t, s.x = start, count + n end
  return ok, rem, retry, reset
end

-- fixedLong is fixedFast on pairs, for a PERIOD of whole seconds (p.pg):
-- any state, any time, for a PERIOD past 2^50 ns or a window far ahead
-- of now. RETRY and RESET are doubles, or bigs past 2^53.
local function fixedLong(p, th, tl, x, nh, nl, n)
  local sh, sl = nh - nh % p.pg, 0 -- now's window
  local count = 0
  local c = pcmp(sh, sl, th, tl)
  if c == 0 then
    count = x
  elseif c < 0 then -- the clock stepped back: stay in the stored window
    sh, sl, count = th, tl, x
  end
  local ok, rem, retry, reset = fixedOutcome(p, count, n, pdur(pnorm(sh + p.pg - nh, sl - nl)))
  return ok, rem, retry, reset, sh, sl, count
end

-- fixedFast is fixedWindow's fast path on a state's numbers, in doubles
-- for a PERIOD of at most 2^50 (p.pn), else on pairs (fixedLong): nil
-- when neither can take the stored window, and else ALLOWED,
-- REMAINING, RETRY and RESET, then the start of the window it decided in
-- and that window's count before n.
local function fixedFast(p, th, tl, x, nh, nl, n)
  if not p.pn then return fixedLong(p, th, tl, x, nh, nl, n) end
  local r = phase(p, nh, nl)
  local sh, sl = pnorm(nh, nl - r)
  local count, toStart = 0, -r -- the window's start minus now
  local c = pcmp(sh, sl, th, tl)
  if c == 0 then
    count = x
  elseif c < 0 then -- the clock stepped back: stay in the stored window
    toStart = pdiff(th, tl, nh, nl)
    if toStart == nil then
      if p.pg then return fixedLong(p, th, tl, x, nh, nl, n) end
      return nil
    end
    sh, sl, count = th, tl, x
  end
  local ok, rem, retry, reset = fixedOutcome(p, count, n, toStart + p.pn)
  return ok, rem, retry, reset, sh, sl, count
end

local function fixedWindow(p, s, nh, nl, n)
  if not (p.pn or p.pg) then return windowExact(fixedExact, p, s, nh, nl, n) end
  local ok, rem, retry, reset, sh, sl, count = fixedFast(p, s.th, s.tl, s.x, nh, nl, n)
  if ok == nil then return windowExact(fixedExact, p, s, nh, nl, n) end
  if ok and n > 0 then s.th, s.tl, s.x = sh, sl, count + n end
  return ok, rem, retry, reset
end

-- slidingExact is algo.Policy.slidingWindow on big integers.
local function slidingExact(p, s, now, n)
  local period = p.period
  local start = sub(now, mod(now, period))
  local at = now
  local cur, prev = 0, 0
  local c = cmp(start, s.t)
  if c == 0 then
    cur, prev = s.x, s.y
  elseif c > 0 and cmp(start, add(s.t, period)) == 0 then
    prev = s.x
  elseif c < 0 then -- the clock stepped back: the stored window's start
    start, at, cur, prev = s.t, s.t, s.x, s.y
  end
  local weighted = mulnum(sub(period, sub(at, start)), prev)
  local function remaining(cur) -- LIMIT - cur - ceil(weighted/PERIOD), at least 0
    local q, r = divq(weighted, period)
    if not iszero(r) then q = q + 1 end
    local rem = p.limit - cur - q
    if rem < 0 then return 0 end
    return rem
  end
  local function room(r, weight) -- floor(r*PERIOD/weight)
    return (divnum(mulnum(period, r), weight))
  end
  if n > 0 and cmp(add(weighted, mulnum(period, cur + n)), p.bp) <= 0 then
    s.t, s.x, s.y = start, cur + n, prev
    return true, remaining(cur + n), 0, sub(add(start, add(period, period)), now)
  end
  local rem, reset, retry = remaining(cur), 0, 0
  if cur > 0 then
    reset = sub(add(start, add(period, period)), now)
  elseif prev > 0 then
    reset = sub(add(start, period), now)
  end
  if n > 0 then
    -- The first instant from at on that admits n (slidingWindowAdmits).
    local admits
    local r = p.limit - n - cur
    if r >= 0 and r < prev then
      local wr = room(r, prev)
      if not iszero(wr) then admits = max(add(start, sub(period, wr)), at) end
    end
    if admits == nil then
      local e = ZERO
      r = p.limit - n
      if r < cur then e = sub(period, room(r, cur)) end
      admits = add(add(start, period), e)
    end
    retry = sub(admits, now)
  end
  return n == 0, rem, retry, reset
end

-- A sliding window's fast path (p.sw) decides in doubles for a policy
-- whose LIMIT*PERIOD is at most 2^50 (p.fast), and for any other of LIMIT
-- at most 2^32 and PERIOD at most WIDEP (a day's quota, a month's): its
-- products of a count and a time, past 2^53, go through weightedRoom,
-- exact in doubles.
local WIDEP = 4503595332403200 -- 2^52 - 2^32 ns, 52 days

-- divfix returns floor(x/w) and x mod w, for integers 0 <= x < 2^53 - 2^32
-- and 0 < w <= 2^32: the double's quotient is off by at most one.
local function divfix(x, w)
  local q = floor(x / w)
  local r = x - q * w
  if r < 0 then return q - 1, r + w end
  if r >= w then return q + 1, r - w end
  return q, r
end

-- weightedRoom returns floor(k*PERIOD/w), for 0 <= k <= w, 0 < w, as
-- algo.Policy.weightedRoom: directly when k*PERIOD is at most 2^50 (p.fast),
-- else as k*floor(PERIOD/w) + floor(k*(PERIOD mod w)/w), the latter
-- product split at 2^16 (w is at most 2^32): every term below 2^50.
local function weightedRoom(p, k, w)
  local period = p.pn
  if p.fast then return floor(k * period / w) end
  if k == w then return period end
  local q, r = divfix(period, w)
  local kh = floor(k / 65536)
  local q1, r1 = divfix(kh * r, w)
  local q2 = divfix(r1 * 65536 + (k - kh * 65536) * r, w)
  return k * q + q1 * 65536 + q2
end

-- weightedCeil returns ceil(prev*x/PERIOD), for 0 < x <= PERIOD: a
-- double's estimate (within 2^-20 of the quotient, below 2^32), checked
-- exactly by weightedRoom when it is near an integer (as wideCeil).
local function weightedCeil(p, prev, x)
  local period = p.pn
  if prev == 0 then return 0 end
  if p.fast then return ceil(prev * x / period) end
  if x == period then return prev end
  local r = prev * x / period
  local k = floor(r + 0.5)
  if r - k > NEARINT or k - r > NEARINT then return ceil(r) end
  -- prev*x <= k*PERIOD exactly when x <= floor(k*PERIOD/prev).
  if x <= weightedRoom(p, k, prev) then return k end
  return k + 1
end

-- slidingAfter returns an offset d (a double, at most 2*PERIOD) from the
-- window's start (sh, sl) as a duration from now: toStart + d when toStart,
-- the start minus now, is known (the start is near), else from the pairs;
-- a double when exact, else a big.
local function slidingAfter(toStart, d, sh, sl, nh, nl)
  if toStart then
    local x = toStart + d
    if x < TWO53 then return x end
    return add(num(toStart), num(d))
  end
  local h, l = pnorm(sh - nh, sl - nl)
  local dl = d % G
  return pdur(h + (d - dl) / G, l + dl)
end

-- slidingAdmits returns the offset from the window's start of the first
-- instant from elapsed on that admits n, as algo.Policy.slidingWindowAdmits.
local function slidingAdmits(p, elapsed, cur, prev, n)
  local period, limit = p.pn, p.limit
  local room = limit - n - cur
  if room >= 0 and room < prev then
    local wr = weightedRoom(p, room, prev)
    if wr > 0 then
      if period - wr < elapsed then return elapsed end
      return period - wr
    end
  end
  room = limit - n
  if room < cur then return 2 * period - weightedRoom(p, room, cur) end
  return period
end

-- slidingFast is slidingWindow's fast path, for a policy that has one
-- (p.sw), on a state's numbers: nil for counts past LIMIT, which another
-- policy left, and else ALLOWED, REMAINING, RETRY and RESET, then the
-- start of the window it decided in and that window's cur (before n) and
-- prev. The estimate's test, prev*(PERIOD-elapsed) + (cur+n)*PERIOD <=
-- LIMIT*PERIOD, is PERIOD-elapsed <= weightedRoom(LIMIT-cur-n, prev) for a
-- room below prev, and LIMIT - cur - ceil(prev*(PERIOD-elapsed)/PERIOD)
-- is REMAINING.
local function slidingFast(p, th, tl, x, y, nh, nl, n)
  local period, limit = p.pn, p.limit
  local r = phase(p, nh, nl)
  local sh, sl = pnorm(nh, nl - r)
  local elapsed, toStart = r, -r -- at minus the start; the start minus now
  local cur, prev = 0, 0
  local c = pcmp(sh, sl, th, tl)
  if c == 0 then
    cur, prev = x, y
  elseif c > 0 then
    local ph, pl = pnorm(th, tl + period)
    if ph == sh and pl == sl then prev = x end
  else -- the clock stepped back: the stored window's start
    toStart = pdiff(th, tl, nh, nl)
    sh, sl, cur, prev, elapsed = th, tl, x, y, 0
  end
  if cur > limit or prev > limit then return nil end
  local left = period - elapsed -- prev's weight times PERIOD is prev*left
  local function remaining(cur)
    local rem = limit - cur - weightedCeil(p, prev, left)
    if rem < 0 then return 0 end
    return rem
  end
  local room = limit - cur - n
  if n > 0 and room >= 0 and (room >= prev or left <= weightedRoom(p, room, prev)) then
    return true, remaining(cur + n), 0, slidingAfter(toStart, 2 * period, sh, sl, nh, nl), sh, sl, cur, prev
  end
  local rem, reset, retry = remaining(cur), 0, 0
  if cur > 0 then
    reset = slidingAfter(toStart, 2 * period, sh, sl, nh, nl)
  elseif prev > 0 then
    reset = slidingAfter(toStart, period, sh, sl, nh, nl)
  end
  if n > 0 then retry = slidingAfter(toStart, slidingAdmits(p, elapsed, cur, prev, n), sh, sl, nh, nl) end
  return n == 0, rem, retry, reset, sh, sl, cur, prev
end

-- slidingWindow is algo.Policy.slidingWindow: on doubles for a policy with
-- a fast path (slidingFast), else on big integers.
local function slidingWindow(p, s, nh, nl, n)
  if not p.sw then return windowExact(slidingExact, p, s, nh, nl, n) end
  local ok, rem, retry, reset, sh, sl, cur, prev = slidingFast(p, s.th, s.tl, s.x, s.y, nh, nl, n)
  if ok == nil then return windowExact(slidingExact, p, s, nh, nl, n) end
  if ok and n > 0 then s.th, s.tl, s.x, s.y = sh, sl, cur + n, prev end
  return ok, rem, retry, reset
end

-- windowFast is slidingFast for a sliding window (p.sw), else fixedFast,
-- for quick: what they return, prev being 0 for a fixed window.
local function windowFast(p, th, tl, x, y, nh, nl, n)
  if p.sw then return slidingFast(p, th, tl, x, y, nh, nl, n) end
  local ok, rem, retry, reset, sh, sl, count = fixedFast(p, th, tl, x, nh, nl, n)
  return ok, rem, retry, reset, sh, sl, count, 0
end
