-- Count the batch at positions [ARGV[2], ARGV[3]) embedded, once, and free its items.
-- KEYS: emb:done, emb:embedded, emb:items, emb:queued.  ARGV: ttl, start, stop.
local ttl = tonumber(ARGV[1])
if redis.call('sadd', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('expire', KEYS[1], ttl)
local fields = {}
for p = tonumber(ARGV[2]), tonumber(ARGV[3]) - 1 do fields[#fields + 1] = p end
if #fields == 0 then return 0 end
local rows = redis.call('hmget', KEYS[3], unpack(fields))
local slots, n = {}, 0
for i = 1, #fields do
  if rows[i] then
    n = n + 1
    local item = cjson.decode(rows[i])
    slots[#slots + 1] = item[1] .. '\0' .. string.format('%d', item[3])
  end
end
if n > 0 then
  redis.call('incrby', KEYS[2], n)
  redis.call('expire', KEYS[2], ttl)
  redis.call('hdel', KEYS[3], unpack(fields))
  redis.call('hdel', KEYS[4], unpack(slots))
end
return n
