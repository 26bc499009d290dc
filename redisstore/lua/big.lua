-- big.lua: exact non-negative integers below 10^30 for Redis's Lua 5.1,
-- whose only numbers are doubles (exact below 2^53). floodgate's core
-- computes in 128-bit integers (a count up to 10^9 times a time in
-- nanoseconds up to 2^62); so does this, in five limbs of base 10^6,
-- least significant first. Every product and partial sum below stays under
-- 2^53, where Lua's % and floor(a/b) are exact for integers (a double's
-- quotient is off by less than 1/b). Decimal strings convert by six-digit
-- chunks.

local BASE = 1000000
-- math.floor and math.ceil, which run sets: a Redis Function library may
-- read no global while it loads.
local floor, ceil
local ZERO = {0, 0, 0, 0, 0}

-- big parses a decimal string of at most 30 digits.
local function big(s)
  local a = {0, 0, 0, 0, 0}
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
  local a = {0, 0, 0, 0, 0}
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
  local top = 5
  while top > 1 and a[top] == 0 do top = top - 1 end
  local s = string.format('%d', a[top])
  for k = top - 1, 1, -1 do s = s .. string.format('%06d', a[k]) end
  return s
end

-- tonum returns a as a double: exact below 2^53.
local function tonum(a)
  return (((a[5] * BASE + a[4]) * BASE + a[3]) * BASE + a[2]) * BASE + a[1]
end

local function cmp(a, b)
  for k = 5, 1, -1 do
    if a[k] ~= b[k] then
      if a[k] < b[k] then return -1 end
      return 1
    end
  end
  return 0
end

local function iszero(a)
  return a[1] == 0 and a[2] == 0 and a[3] == 0 and a[4] == 0 and a[5] == 0
end

local function add(a, b)
  local c, carry = {}, 0
  for k = 1, 5 do
    local v = a[k] + b[k] + carry
    if v >= BASE then c[k], carry = v - BASE, 1 else c[k], carry = v, 0 end
  end
  return c
end

-- sub returns a-b; the caller makes sure a >= b.
local function sub(a, b)
  local c, borrow = {}, 0
  for k = 1, 5 do
    local v = a[k] - b[k] - borrow
    if v < 0 then c[k], borrow = v + BASE, 1 else c[k], borrow = v, 0 end
  end
  return c
end

-- mulsmall returns a*m for an integer 0 <= m <= 2^32.
local function mulsmall(a, m)
  local c, carry = {}, 0
  for k = 1, 5 do
    local v = a[k] * m + carry
    local r = v % BASE
    c[k], carry = r, (v - r) / BASE
  end
  return c
end

-- divsmall returns a/d and a%d (a number) for an integer 0 < d <= 2^32.
local function divsmall(a, d)
  local q, r = {}, 0
  for k = 5, 1, -1 do
    local v = r * BASE + a[k]
    r = v % d
    q[k] = (v - r) / d
  end
  return q, r
end

-- ceildivsmall returns a/d rounded up.
local function ceildivsmall(a, d)
  local q, r = divsmall(a, d)
  if r ~= 0 then q = add(q, {1, 0, 0, 0, 0}) end
  return q
end

-- divq returns a/b (a number) and a%b for b > 0 when the quotient is at
-- most 2^32: a double's estimate, corrected by exact arithmetic.
local function divq(a, b)
  local q = floor(tonum(a) / tonum(b))
  if q > 4294967296 then error('floodgate: quotient out of range') end
  local p = mulsmall(b, q)
  while cmp(p, a) > 0 do q, p = q - 1, sub(p, b) end
  local r = sub(a, p)
  while cmp(r, b) >= 0 do q, r = q + 1, sub(r, b) end
  return q, r
end

-- mod returns a%b for b > 0 where a/b is at most 2^32 or b at most 2^32.
local function mod(a, b)
  if b[3] == 0 and b[4] == 0 and b[5] == 0 and tonum(b) <= 4294967296 then
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
