-- Free the live values of a log at positions [ARGV[1], ARGV[2]) and their slots.
-- KEYS: slots, items, slot_of.
local fields = {}
for p = tonumber(ARGV[1]), tonumber(ARGV[2]) - 1 do fields[#fields + 1] = p end
if #fields == 0 then return 0 end
local slots, live = redis.call('hmget', KEYS[3], unpack(fields)), {}
for i = 1, #fields do
  if slots[i] then live[#live + 1] = slots[i] end
end
if #live == 0 then return 0 end
redis.call('hdel', KEYS[1], unpack(live))
redis.call('hdel', KEYS[3], unpack(fields))
return redis.call('hdel', KEYS[2], unpack(fields))
