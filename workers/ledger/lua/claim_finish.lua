-- True (1) exactly once for a running run.  KEYS: meta.
if redis.call('hget', KEYS[1], 'state') ~= 'running' then return 0 end
return redis.call('hsetnx', KEYS[1], 'finished', '1')
