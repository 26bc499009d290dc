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
  local tl = mulsmall(pbig(nh, nl), limit)
  local tat = add(mulsmall(pbig(s.th, s.tl), limit), num(frac))
  local wait = ZERO
  if cmp(tl, tat) < 0 then wait = sub(tat, tl) end
  local after = add(wait, mulsmall(p.period, n))
  local function remaining(w) -- floor((tau - w)/T), at least 0
    if cmp(p.bp, w) < 0 then return 0 end
    return (divq(sub(p.bp, w), p.period))
  end
  if n > 0 and cmp(after, p.bp) <= 0 then
    local t, f = divsmall(add(tl, after), limit)
    s.th, s.tl = bigp(t)
    s.x = f
    return true, remaining(after), 0, ceildivsmall(after, limit)
  end
  local retry = 0
  if n > 0 then retry = ceildivsmall(sub(after, p.bp), limit) end
  return n == 0, remaining(wait), retry, ceildivsmall(wait, limit)
end

-- bucket works in doubles, relative to now, when the policy's tau (p.bpn)
-- is at most 2^50 and TAT is not far ahead of now.
local function bucket(p, s, nh, nl, n)
  if not p.fast then return bucketExact(p, s, nh, nl, n) end
  local limit, period, bp = p.limit, p.pn, p.bpn
  local frac = s.x
  if frac >= limit then frac = limit - 1 end
  -- wait is TAT - now in units, or 0 when TAT has passed: TAT - now <= 0
  -- ns leaves less than one unit of fraction.
  local wait = 0
  if s.th >= nh - 1 then
    local d = pdiff(s.th, s.tl, nh, nl)
    if d == nil or d > p.dmax then return bucketExact(p, s, nh, nl, n) end
    if d == 0 then
      wait = frac
    elseif d > 0 then
      wait = d * limit + frac
    end
  end
  local after = wait + n * period
  if n > 0 and after <= bp then
    local f = after % limit
    s.th, s.tl = pnorm(nh, nl + (after - f) / limit)
    s.x = f
    return true, floor((bp - after) / period), 0, ceil(after / limit)
  end
  local rem, retry = 0, 0
  if wait <= bp then rem = floor((bp - wait) / period) end
  if n > 0 then retry = ceil((after - bp) / limit) end
  return n == 0, rem, retry, ceil(wait / limit)
end

-- refundBucket gives back the part of the event's n*T still ahead of now,
-- as algo.Policy.refundBucket, on big integers (refunds are rare).
local function refundBucket(p, s, st, nh, nl, n)
  local limit = p.limit
  if st.frac >= limit then return end
  local tl = mulsmall(pbig(nh, nl), limit)
  local tatR = add(mulsmall(pbig(st.th, st.tl), limit), num(st.frac))
  if cmp(tl, tatR) >= 0 then return end
  local held = sub(tatR, tl)
  local span = mulsmall(p.period, n)
  if cmp(span, held) < 0 then held = span end
  local tat = add(mulsmall(pbig(s.th, s.tl), limit), num(s.x))
  if cmp(held, tat) >= 0 then return end
  tat = sub(tat, held)
  if cmp(tat, tl) < 0 then tat = tl end
  local t, f = divsmall(tat, limit)
  s.th, s.tl = bigp(t)
  s.x = f
end
