-- Append (slot, value) entries to a log once per name; return the JSON positions of the name's
-- entries (a slot already live keeps its position), or false, appending nothing, when a limit is
-- given (>= 0), there are entries and more than `limit` values are live.
-- KEYS: names, slots, items, slot_of, length.  ARGV: ttl (ms), name, limit (-1: none), then slot, value.
local got = redis.call('hget', KEYS[1], ARGV[2])
if got then return got end
local limit = tonumber(ARGV[3])
if limit >= 0 and #ARGV > 3 and redis.call('hlen', KEYS[3]) > limit then return false end
local positions = {}
for i = 4, #ARGV, 2 do
  local pos = redis.call('hget', KEYS[2], ARGV[i])
  if not pos then
    pos = redis.call('incr', KEYS[5]) - 1
    redis.call('hset', KEYS[3], pos, ARGV[i + 1])
    redis.call('hset', KEYS[2], ARGV[i], pos)
    redis.call('hset', KEYS[4], pos, ARGV[i])
  end
  positions[#positions + 1] = tonumber(pos)
end
got = '[]'
if #positions > 0 then got = cjson.encode(positions) end
redis.call('hset', KEYS[1], ARGV[2], got)
for i = 1, 5 do redis.call('pexpire', KEYS[i], ARGV[1]) end
return got
