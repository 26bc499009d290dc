-- big.lua: exact non-negative integers below 10^36 for Redis's Lua 5.1,
-- whose only numbers are doubles (exact below 2^53). floodgate's core
-- computes in 128-bit integers (a count up to 10^15 times a time in
-- nanoseconds up to 2^63, below 10^34); so does this, in six limbs of base
-- 10^6, least significant first. Every product and partial sum below stays
-- under 2^53, where Lua's % and floor(a/b) are exact for integers (a
-- double's quotient is off by less than 1/b). Decimal strings convert by
-- six-digit chunks. Counts (LIMIT, costs, a window's units) are plain
-- doubles, exact since they are at most 2*10^15 < 2^53; only their products
-- with times go through here.

local BASE, LIMBS = 1000000, 6
local SMALLD = 4294967296 -- 2^32: the largest multiplier or divisor a limb loop takes
-- math.floor and math.ceil, which run sets: a Redis Function library may
-- read no global while it loads.
local floor, ceil
local ZERO = {0, 0, 0, 0, 0, 0}

-- big parses a decimal string of at most 36 digits.
local function big(s)
  local a = {0, 0, 0, 0, 0, 0}
  local i, k = #s, 1
  while i > 0 do
    local j = i - 5
    if j < 1 then j = 1 end
    a[k] = tonumber(string.sub(s, j, i))
    k, i = k + 1, j - 1
  end
  return a
end

-- num converts an integer 0 <= x < 2^53.
local function num(x)
  local a = {0, 0, 0, 0, 0, 0}
  local k = 1
  while x > 0 do
    local r = x % BASE
    a[k] = r
    x = (x - r) / BASE
    k = k + 1
  end
  return a
end

-- str formats a in decimal.
local function str(a)
  local top = LIMBS
  while top > 1 and a[top] == 0 do top = top - 1 end
  local s = string.format('%d', a[top])
  for k = top - 1, 1, -1 do s = s .. string.format('%06d', a[k]) end
  return s
end

-- tonum returns a as a double: exact below 2^53.
local function tonum(a)
  return ((((a[6] * BASE + a[5]) * BASE + a[4]) * BASE + a[3]) * BASE + a[2]) * BASE + a[1]
end

local function cmp(a, b)
  for k = LIMBS, 1, -1 do
    if a[k] ~= b[k] then
      if a[k] < b[k] then return -1 end
      return 1
    end
  end
  return 0
end

local function iszero(a)
  return a[1] == 0 and a[2] == 0 and a[3] == 0 and a[4] == 0 and a[5] == 0 and a[6] == 0
end

local function add(a, b)
  local c, carry = {}, 0
  for k = 1, LIMBS do
    local v = a[k] + b[k] + carry
    if v >= BASE then c[k], carry = v - BASE, 1 else c[k], carry = v, 0 end
  end
  return c
end

-- sub returns a-b; the caller makes sure a >= b.
local function sub(a, b)
  local c, borrow = {}, 0
  for k = 1, LIMBS do
    local v = a[k] - b[k] - borrow
    if v < 0 then c[k], borrow = v + BASE, 1 else c[k], borrow = v, 0 end
  end
  return c
end

-- mulsmall returns a*m for an integer 0 <= m <= 2^32.
local function mulsmall(a, m)
  local c, carry = {}, 0
  for k = 1, LIMBS do
    local v = a[k] * m + carry
    local r = v % BASE
    c[k], carry = r, (v - r) / BASE
  end
  return c
end

-- mulnum returns a*m for an integer 0 <= m < 2^53: limb by limb of m
-- when it is past 2^32, each partial product below 10^12.
local function mulnum(a, m)
  if m <= SMALLD then return mulsmall(a, m) end
  local b, c = num(m), {0, 0, 0, 0, 0, 0}
  for i = 1, LIMBS do
    if b[i] ~= 0 then
      local carry = 0
      for k = i, LIMBS do
        local v = c[k] + a[k - i + 1] * b[i] + carry
        local r = v % BASE
        c[k], carry = r, (v - r) / BASE
      end
    end
  end
  return c
end

-- divsmall returns a/d and a%d (a number) for an integer 0 < d <= 2^32.
local function divsmall(a, d)
  local q, r = {}, 0
  for k = LIMBS, 1, -1 do
    local v = r * BASE + a[k]
    r = v % d
    q[k] = (v - r) / d
  end
  return q, r
end

-- divq returns a/b (a number) and a%b for b > 0 when the quotient is
-- below 2^53: a double's estimate (off by a few units at most: each tonum
-- is within 2^-50 of its big), corrected by exact arithmetic.
local function divq(a, b)
  local q = floor(tonum(a) / tonum(b))
  if q >= 9007199254740992 then error('floodgate: quotient out of range') end
  local p = mulnum(b, q)
  while cmp(p, a) > 0 do q, p = q - 1, sub(p, b) end
  local r = sub(a, p)
  while cmp(r, b) >= 0 do q, r = q + 1, sub(r, b) end
  return q, r
end

-- divnum returns a/d and a%d (a number) for an integer 0 < d < 2^53, any
-- quotient: past 2^32, long division limb by limb, each step's remainder
-- times BASE (below 2^73) divided as a big.
local function divnum(a, d)
  if d <= SMALLD then return divsmall(a, d) end
  local q, r, db = {}, 0, num(d)
  for k = LIMBS, 1, -1 do
    local v = mulsmall(num(r), BASE)
    v[1] = a[k]
    local rk
    q[k], rk = divq(v, db)
    r = tonum(rk)
  end
  return q, r
end

-- ceildivnum returns a/d rounded up, for 0 < d < 2^53.
local function ceildivnum(a, d)
  local q, r = divnum(a, d)
  if r ~= 0 then q = add(q, {1, 0, 0, 0, 0, 0}) end
  return q
end

-- mod returns a%b for b > 0 where a/b is below 2^53 or b at most 2^32.
local function mod(a, b)
  if b[3] == 0 and b[4] == 0 and b[5] == 0 and b[6] == 0 and tonum(b) <= SMALLD then
    local _, r = divsmall(a, tonum(b))
    return num(r)
  end
  local _, r = divq(a, b)
  return r
end

local function max(a, b)
  if cmp(a, b) < 0 then return b end
  return a
end
