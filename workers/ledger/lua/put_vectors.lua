-- Store vectors per (doc key, ordinal) unless the document is settled; return the documents
-- (touched or checked) that now hold every expected vector, and add them to emb:complete.
-- KEYS: emb:expected, emb:settled, emb:complete.
-- ARGV: ttl, vector key prefix, number of checked keys, the checked keys, then key, ordinal, blob.
local ttl, prefix, ncheck = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local order, seen = {}, {}
local function touch(k)
  if not seen[k] then seen[k] = true; order[#order + 1] = k end
end
for i = 4, 3 + ncheck do touch(ARGV[i]) end
for i = 4 + ncheck, #ARGV, 3 do
  local k = ARGV[i]
  if redis.call('sismember', KEYS[2], k) == 0 then
    redis.call('hset', prefix .. k, ARGV[i + 1], ARGV[i + 2])
    redis.call('expire', prefix .. k, ttl)
    touch(k)
  end
end
local done = {}
for _, k in ipairs(order) do
  if redis.call('sismember', KEYS[2], k) == 0 then
    local want = redis.call('hget', KEYS[1], k)
    if want and redis.call('hlen', prefix .. k) >= tonumber(want) then done[#done + 1] = k end
  end
end
if #done > 0 then
  redis.call('sadd', KEYS[3], unpack(done))
  redis.call('expire', KEYS[3], ttl)
end
return done
