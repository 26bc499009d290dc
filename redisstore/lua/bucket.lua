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

-- bucketNarrow is bucket's fast path on a state's numbers, in doubles,
-- relative to now, for a policy whose tau (p.bpn) is at most 2^50: it
-- returns nil when TAT is too far ahead of now for it, and else ALLOWED,
-- REMAINING, RETRY and RESET, then, when it admits, the new TH, TL and X.
local function bucketNarrow(p, th, tl, x, nh, nl, n)
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

-- A wide policy (p.wide) is a bucket's whose LIMIT and burst are at most
-- 2^32: a day's quota, a month's, whose tau is past 2^50 units, and a
-- short policy's state far from now (a clock that stepped back). Its
-- fast path works in triples (s, ns, f), s*10^9 + ns whole ns plus f
-- units, with 0 <= ns < 10^9 and 0 <= f < LIMIT: every sum, product and
-- quotient below stays under 2^53, whatever the policy's period. The
-- policy holds T and 2^16*T (p.ts, p.tn, p.tf; p.t16s, ...), tau (p.taus,
-- ...), and T in ns as a double (p.td), for estimates.

-- triple returns a/LIMIT, for a big a, as a triple.
local function triple(a, limit)
  local q, f = divsmall(a, limit)
  local s, ns = bigp(q)
  return s, ns, f
end

-- widePolicy sets p's constants for the wide fast path, when first
-- needed: a narrow policy seldom needs them, and a script (EVAL) parses
-- its policies on every call.
local function widePolicy(p)
  p.ts, p.tn, p.tf = triple(p.period, p.limit)
  p.t16s, p.t16n, p.t16f = triple(mulsmall(p.period, 65536), p.limit)
  p.taus, p.taun, p.tauf = triple(p.bp, p.limit)
  p.td = tonum(p.period) / p.limit
end

-- wideTimes returns c*T, for 0 <= c <= burst+1, as a triple: c in two
-- halves, each product below 2^50.
local function wideTimes(p, c)
  if c == 1 then return p.ts, p.tn, p.tf end
  local ch = floor(c / 65536)
  local cl = c - ch * 65536
  local f = cl * p.tf + ch * p.t16f
  local cf = floor(f / p.limit)
  local ns = cl * p.tn + ch * p.t16n + cf
  local cn = floor(ns / G)
  return cl * p.ts + ch * p.t16s + cn, ns - cn * G, f - cf * p.limit
end

-- tcmp compares triples.
local function tcmp(as, an, af, bs, bn, bf)
  if as ~= bs then
    if as < bs then return -1 end
    return 1
  end
  return pcmp(an, af, bn, bf)
end

-- NEARINT: how close to an integer a quotient estimate must be for
-- wideCeil to check it exactly; the estimate is within 2^-18 of the
-- quotient (eight roundings of 2^-53 each, on a quotient below 2^33).
local NEARINT = 1 / 4096

-- wideCeil returns ceil(w/T) for a wait w = (ws, wn, wf) of at most tau:
-- a double's estimate, checked exactly when it is near an integer.
local function wideCeil(p, ws, wn, wf)
  if ws == 0 and wn == 0 and wf == 0 then return 0 end
  local r = (ws * G + wn + wf / p.limit) / p.td
  local k = floor(r + 0.5)
  if r - k > NEARINT or k - r > NEARINT then return ceil(r) end
  if tcmp(ws, wn, wf, wideTimes(p, k)) <= 0 then return k end
  return k + 1
end

-- wideUnits returns ceil(a/LIMIT) ns, for a triple a, as a duration.
local function wideUnits(s, ns, f)
  if f > 0 then ns = ns + 1 end
  return pdur(s, ns)
end

-- bucketWide is bucket's fast path for a wide policy, on a state's
-- numbers, as bucketNarrow but for any TAT: it returns ALLOWED,
-- REMAINING, RETRY and RESET (doubles, or bigs past 2^53), then, when it
-- admits, the new TH, TL and X. REMAINING is floor((tau - after)/T) =
-- burst - n - ceil(wait/T), since tau is burst*T.
local function bucketWide(p, th, tl, x, nh, nl, n)
  local limit = p.limit
  -- wait is TAT - now in units, or 0 when TAT has passed (bucketNarrow).
  local ws, wn, wf = th - nh, tl - nl, x
  if wf >= limit then wf = limit - 1 end
  if wn < 0 then ws, wn = ws - 1, wn + G end
  if ws < 0 then ws, wn, wf = 0, 0, 0 end
  local as, an, af = ws, wn, wf -- after = wait + n*T
  if n > 0 then
    local cs, cn, cf = wideTimes(p, n)
    as, an, af = as + cs, an + cn, af + cf
    if af >= limit then af, an = af - limit, an + 1 end
    if an >= G then an, as = an - G, as + 1 end
  end
  local taus, taun, tauf = p.taus, p.taun, p.tauf
  if n > 0 and tcmp(as, an, af, taus, taun, tauf) <= 0 then
    local h, l = pnorm(nh + as, nl + an)
    return true, p.burst - n - wideCeil(p, ws, wn, wf), 0, wideUnits(as, an, af), h, l, af
  end
  local rem, retry = 0, 0
  if tcmp(ws, wn, wf, taus, taun, tauf) <= 0 then rem = p.burst - wideCeil(p, ws, wn, wf) end
  if n > 0 then -- after - tau
    local rs, rn, rf = as - taus, an - taun, af - tauf
    if rf < 0 then rf, rn = rf + limit, rn - 1 end
    if rn < 0 then rn, rs = rn + G, rs - 1 end
    retry = wideUnits(rs, rn, rf)
  end
  return n == 0, rem, retry, wideUnits(ws, wn, wf)
end

-- bucketFast is bucket's fast path for a policy that has one (p.fast or
-- p.wide): the narrow one, else (a state too far from now for it) the
-- wide one; nil when neither applies, or what bucketNarrow returns.
local function bucketFast(p, th, tl, x, nh, nl, n)
  if p.fast then
    local ok, rem, retry, reset, h, l, f = bucketNarrow(p, th, tl, x, nh, nl, n)
    if ok ~= nil or not p.wide then return ok, rem, retry, reset, h, l, f end
  end
  if p.ts == nil then widePolicy(p) end
  return bucketWide(p, th, tl, x, nh, nl, n)
end

-- bucket takes a fast path when it can.
local function bucket(p, s, nh, nl, n)
  if not (p.fast or p.wide) then return bucketExact(p, s, nh, nl, n) end
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
