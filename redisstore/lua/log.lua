-- log.lua: sliding-log, exactly as algo.Policy.slidingLog. A key's log is
-- a Redis hash: fields h (the index of the oldest entry), c (the number of
-- entries) and u (their units), and one field per entry, its index, holding
-- "T N": N units admitted at T ns. In the script, s.ov holds the entries
-- written so far (an entry {th, tl, n}, or false once removed); the others
-- are read from Redis when first needed, and kept in s.base, which the
-- state's undo copies share. Entries are never changed in place, so that a
-- copy of s.ov can be kept for undo.

local function logEntry(s, i)
  local idx = s.head + i
  local e = s.ov[idx]
  if e == nil then
    local cache = s.base
    e = cache[idx]
    if e == nil then
      local v = redis.call('HGET', s.key, string.format('%d', idx))
      local t, k = string.match(v or '', '^(%d+) (%d+)$')
      if t == nil then error('floodgate: corrupt sliding-log entry ' .. idx .. ' of ' .. s.key) end
      local th, tl = pparse(t)
      e = {th = th, tl = tl, n = tonumber(k)}
      cache[idx] = e
    end
  end
  return e
end

-- logDrop removes the k oldest entries, which hold units units.
local function logDrop(s, k, units)
  for i = 0, k - 1 do s.ov[s.head + i] = false end
  s.head, s.c, s.u = s.head + k, s.c - k, s.u - units
end

-- logPush appends n units at (th, tl), not before the newest entry.
local function logPush(s, th, tl, n)
  s.u = s.u + n
  if s.c > 0 then
    local last = logEntry(s, s.c - 1)
    if last.th == th and last.tl == tl then
      s.ov[s.head + s.c - 1] = {th = th, tl = tl, n = last.n + n}
      return
    end
  end
  s.ov[s.head + s.c] = {th = th, tl = tl, n = n}
  s.c = s.c + 1
end

-- logTake removes up to n units from the entry at (th, tl), and the entry
-- when it empties.
local function logTake(s, th, tl, n)
  for i = 0, s.c - 1 do
    local e = logEntry(s, i)
    if e.th == th and e.tl == tl then
      local k = n
      if e.n < k then k = e.n end
      s.u = s.u - k
      if k < e.n then
        s.ov[s.head + i] = {th = th, tl = tl, n = e.n - k}
        return
      end
      for j = i, s.c - 2 do s.ov[s.head + j] = logEntry(s, j + 1) end
      s.ov[s.head + s.c - 1] = false
      s.c = s.c - 1
      return
    end
  end
end

-- untilExpiry returns (th, tl) + PERIOD - now, for an entry that has not
-- expired at now: a double when exact, else a big. It works on pairs
-- (PERIOD is p.ph s + p.pl ns), whatever the PERIOD and the entry's
-- distance from now.
local function untilExpiry(p, th, tl, nh, nl)
  return pdur(pnorm(th + p.ph - nh, tl + p.pl - nl))
end

local function slidingLog(p, s, nh, nl, n)
  local ah, al = nh, nl -- at: the event's time, or the newest entry's if later
  if s.c > 0 then
    local last = logEntry(s, s.c - 1)
    if pcmp(last.th, last.tl, ah, al) > 0 then ah, al = last.th, last.tl end
  end
  -- Entries [0, expired) are PERIOD old or older at at: their time is at
  -- most at - PERIOD (the cutoff), which may be before 0.
  local ch, cl = pnorm(ah - p.ph, al - p.pl)
  local expired, gone = 0, 0
  while expired < s.c do
    local e = logEntry(s, expired)
    if pcmp(e.th, e.tl, ch, cl) > 0 then break end
    gone, expired = gone + e.n, expired + 1
  end
  local count = s.u - gone
  if n > 0 and count + n <= p.limit then
    logDrop(s, expired, gone)
    logPush(s, ah, al, n)
    return true, p.limit - count - n, 0, untilExpiry(p, ah, al, nh, nl)
  end
  local rem, reset, retry = p.limit - count, 0, 0
  if rem < 0 then rem = 0 end
  if count > 0 then
    local last = logEntry(s, s.c - 1)
    reset = untilExpiry(p, last.th, last.tl, nh, nl)
  end
  if n > 0 then
    -- Wait until the oldest entries holding count+n-LIMIT units expire.
    local need = count + n - p.limit
    for i = expired, s.c - 1 do
      local e = logEntry(s, i)
      need = need - e.n
      if need <= 0 then
        retry = untilExpiry(p, e.th, e.tl, nh, nl)
        break
      end
    end
  end
  return n == 0, rem, retry, reset
end
