-- Give the key a new TTL (ARGV[2], ms) or delete it (ARGV[2] = 'del') if it holds ARGV[1].
-- KEYS: the key.  (The run lock: only its holder refreshes or releases it.)
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == 'del' then return redis.call('del', KEYS[1]) end
return redis.call('pexpire', KEYS[1], ARGV[2])
