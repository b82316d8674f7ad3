-- Extend (ARGV[2] = ttl in ms) or delete (ARGV[2] = 'del') the run lock if ARGV[1] holds it.
-- KEYS: the lock.
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == 'del' then return redis.call('del', KEYS[1]) end
return redis.call('pexpire', KEYS[1], tonumber(ARGV[2]))
