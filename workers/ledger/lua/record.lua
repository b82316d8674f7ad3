-- Record (path, outcome, reason) triples; the first outcome of a path wins (HSETNX), counted once.
-- KEYS: out, cnt, fail, skip.  ARGV: ttl, then path, outcome, reason per triple.
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  local path, outcome, reason = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('hsetnx', KEYS[1], path, outcome) == 1 then
    redis.call('hincrby', KEYS[2], outcome, 1)
    if outcome == 'failed' then
      redis.call('hset', KEYS[3], path, reason)
    elseif outcome == 'skipped' then
      redis.call('hset', KEYS[4], path, reason)
    end
  end
end
for i = 1, 4 do redis.call('expire', KEYS[i], ttl) end
return 1
