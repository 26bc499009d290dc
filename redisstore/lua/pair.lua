-- pair.lua: instants as pairs of doubles (h, l), the instant h*10^9 + l ns
-- with 0 <= l < 10^9: any time up to algo.MaxTime, exactly, without the
-- cost of big integers. Two instants less than NEAR seconds apart differ
-- by an exact double number of nanoseconds (below 2^51); the algorithms'
-- fast paths work in such differences, and fall back to big integers when
-- instants are further apart (a clock that stepped far back) or a policy's
-- products would not fit in 2^53.

local G = 1000000000
local NEAR = 2000000 -- seconds: 2*10^15 ns < 2^51
local FAST = 1125899906842624 -- 2^50: the largest product a fast path may hold
local TWO53 = 9007199254740992

-- pnorm returns (h, l) with l brought into [0, G), for |l| < 2^53.
local function pnorm(h, l)
  if l >= 0 and l < G then return h, l end
  local r = l % G
  return h + (l - r) / G, r
end

local function pcmp(ah, al, bh, bl)
  if ah ~= bh then
    if ah < bh then return -1 end
    return 1
  end
  if al ~= bl then
    if al < bl then return -1 end
    return 1
  end
  return 0
end

-- pdiff returns a - b in ns, or nil when a and b are NEAR or more apart.
local function pdiff(ah, al, bh, bl)
  local dh = ah - bh
  if dh >= NEAR or dh <= -NEAR then return nil end
  return dh * G + (al - bl)
end

local function pbig(h, l) return add(mulsmall(num(h), G), num(l)) end

local function bigp(a)
  local q, r = divsmall(a, G)
  return tonum(q), r
end

-- pparse reads a decimal number of nanoseconds.
local function pparse(s)
  local n = #s
  if n <= 9 then return 0, tonumber(s) end
  return tonumber(string.sub(s, 1, n - 9)), tonumber(string.sub(s, n - 8))
end

-- pdur returns the duration h*10^9 + l ns, for 0 <= l < 2*10^9: a double
-- when exact (below 2^53), else a big.
local function pdur(h, l)
  if l >= G then h, l = h + 1, l - G end
  if h < 9007198 then return h * G + l end
  return pbig(h, l)
end

local function pstr(h, l)
  if h == 0 then return string.format('%d', l) end
  return string.format('%d%09d', h, l)
end

-- dur adds a duration, a double or a big, to a big: for the exact paths.
local function dbig(d)
  if type(d) == 'table' then return d end
  return num(d)
end
