-- Append an ingest message's items to the backlog once per ingest key; return the JSON positions,
-- or false when a limit is given (>= 0) and more than `limit` chunks wait for their vectors.
-- KEYS: emb:positions, emb:queued, emb:items, emb:length, emb:embedded.
-- ARGV: ttl, ingest key, limit (-1: none), then slot, JSON item per item.
local ttl, key = tonumber(ARGV[1]), ARGV[2]
local got = redis.call('hget', KEYS[1], key)
if got then return got end
local limit = tonumber(ARGV[3])
if limit >= 0 and #ARGV > 3 then
  local pending = tonumber(redis.call('get', KEYS[4]) or '0') - tonumber(redis.call('get', KEYS[5]) or '0')
  if pending > limit then return false end
end
local positions = {}
for i = 4, #ARGV, 2 do
  local pos = redis.call('hget', KEYS[2], ARGV[i])
  if not pos then
    pos = redis.call('incr', KEYS[4]) - 1
    redis.call('hset', KEYS[3], pos, ARGV[i + 1])
    redis.call('hset', KEYS[2], ARGV[i], pos)
  end
  positions[#positions + 1] = tonumber(pos)
end
got = '[]'
if #positions > 0 then got = cjson.encode(positions) end
redis.call('hset', KEYS[1], key, got)
for i = 1, 4 do redis.call('expire', KEYS[i], ttl) end
return got
