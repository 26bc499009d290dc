-- bucket.lua: token-bucket and leaky-bucket (GCRA), exactly as
-- algo.Policy.bucket, in units of 1/LIMIT ns: the theoretical arrival time
-- TAT is s.th*10^9 + s.tl whole ns plus s.x/LIMIT. Each function returns
-- ALLOWED, REMAINING, RETRY, RESET, the durations as doubles or bigs, and
-- changes s only when it admits.

-- bucketExact works on big integers, for any policy and times.
local function bucketExact(p, s, nh, nl, n)
  local limit = p.limit
  local frac = s.x
  if frac >= limit then frac = limit - 1 end
  local tl = mulnum(pbig(nh, nl), limit)
  local tat = add(mulnum(pbig(s.th, s.tl), limit), num(frac))
  local wait = ZERO
  if cmp(tl, tat) < 0 then wait = sub(tat, tl) end
  local after = add(wait, mulnum(p.period, n))
  local function remaining(w) -- floor((tau - w)/T), at least 0
    if cmp(p.bp, w) < 0 then return 0 end
    return (divq(sub(p.bp, w), p.period))
  end
  if n > 0 and cmp(after, p.bp) <= 0 then
    local t, f = divnum(add(tl, after), limit)
    s.th, s.tl = bigp(t)
    s.x = f
    return true, remaining(after), 0, ceildivnum(after, limit)
  end
  local retry = 0
  if n > 0 then retry = ceildivnum(sub(after, p.bp), limit) end
  return n == 0, remaining(wait), retry, ceildivnum(wait, limit)
end

-- bucketFast is bucket's fast path on a state's numbers, in doubles,
-- relative to now, for a policy whose tau (p.bpn) is at most 2^50: it
-- returns nil when TAT is too far ahead of now for it, and else ALLOWED,
-- REMAINING, RETRY and RESET, then, when it admits, the new TH, TL and X.
local function bucketFast(p, th, tl, x, nh, nl, n)
  local limit, period, bp = p.limit, p.pn, p.bpn
  local frac = x
  if frac >= limit then frac = limit - 1 end
  -- wait is TAT - now in units, or 0 when TAT has passed: TAT - now <= 0
  -- ns leaves less than one unit of fraction.
  local wait = 0
  if th >= nh - 1 then
    local d = pdiff(th, tl, nh, nl)
    if d == nil or d > p.dmax then return nil end
    if d == 0 then
      wait = frac
    elseif d > 0 then
      wait = d * limit + frac
    end
  end
  local after = wait + n * period
  if n > 0 and after <= bp then
    local f = after % limit
    local h, l = pnorm(nh, nl + (after - f) / limit)
    return true, floor((bp - after) / period), 0, ceil(after / limit), h, l, f
  end
  local rem, retry = 0, 0
  if wait <= bp then rem = floor((bp - wait) / period) end
  if n > 0 then retry = ceil((after - bp) / limit) end
  return n == 0, rem, retry, ceil(wait / limit)
end

-- bucket takes the fast path when it can.
local function bucket(p, s, nh, nl, n)
  if not p.fast then return bucketExact(p, s, nh, nl, n) end
  local ok, rem, retry, reset, h, l, f = bucketFast(p, s.th, s.tl, s.x, nh, nl, n)
  if ok == nil then return bucketExact(p, s, nh, nl, n) end
  if h then s.th, s.tl, s.x = h, l, f end
  return ok, rem, retry, reset
end

-- refundBucket gives back the part of the event's n*T still ahead of now,
-- unless units were reserved after it, as algo.Policy.refundBucket, on
-- big integers (refunds are rare).
local function refundBucket(p, s, st, nh, nl, n)
  local limit = p.limit
  if st.frac >= limit then return end
  local tl = mulnum(pbig(nh, nl), limit)
  local tatR = add(mulnum(pbig(st.th, st.tl), limit), num(st.frac))
  local tat = add(mulnum(pbig(s.th, s.tl), limit), num(s.x))
  if cmp(tl, tatR) >= 0 or cmp(tat, tatR) > 0 then return end
  local held = sub(tatR, tl)
  local span = mulnum(p.period, n)
  if cmp(span, held) < 0 then held = span end
  if cmp(held, tat) >= 0 then return end
  tat = sub(tat, held)
  if cmp(tat, tl) < 0 then tat = tl end
  local t, f = divnum(tat, limit)
  s.th, s.tl = bigp(t)
  s.x = f
end
