-- Set each field of KEYS[1] not set yet (the first value wins); with ARGV[2] = '1', add one to
-- field <value> of KEYS[2] for each field set.  Return the value each field holds after.
-- KEYS: hash, counts.  ARGV: ttl (ms), count ('1' or '0'), then field, value per field.
local counting = ARGV[2] == '1'
local held = {}
for i = 3, #ARGV, 2 do
  if redis.call('hsetnx', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    held[#held + 1] = ARGV[i + 1]
    if counting then redis.call('hincrby', KEYS[2], ARGV[i + 1], 1) end
  else
    held[#held + 1] = redis.call('hget', KEYS[1], ARGV[i])
  end
end
redis.call('pexpire', KEYS[1], ARGV[1])
if counting then redis.call('pexpire', KEYS[2], ARGV[1]) end
return held
