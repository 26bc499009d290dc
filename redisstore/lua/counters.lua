-- counters.lua: the counters' additions (Store.Counters). ARGV holds, for
-- each addition, its key, its units and the key's expiry in milliseconds;
-- KEYS holds the first key alone, which routes the call on a Cluster. Each
-- addition is an INCRBY, and when the INCRBY made the key (its result is
-- the units added) the key's PEXPIRE, in the same call: a key never stays
-- without its expiry. The reply has, for each addition, its count, or the
-- error Redis answered for it alone (a string): a key of another type, or
-- of a slot this node does not serve, fails only its own addition.
local function count(keys, argv)
  local out = {}
  for i = 1, #argv, 3 do
    local key, n = argv[i], argv[i + 1]
    local v = redis.pcall('INCRBY', key, n)
    if type(v) == 'table' then
      out[#out + 1] = v.err
    else
      if v == tonumber(n) then redis.call('PEXPIRE', key, argv[i + 2]) end
      out[#out + 1] = v
    end
  end
  return out
end
