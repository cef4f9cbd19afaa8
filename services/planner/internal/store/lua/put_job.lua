-- Stores a job definition and its next fire time, enforcing the collection's maxJobCount.
-- KEYS: 1 coll, 2 jobs, 3 def, 4 st, 5 due
-- ARGV: 1 member, 2 job name, 3 definition blob, 4 accepted (ms), 5 next (ms, or "" for none),
--       6 state, 7 expected version ("" for any; a number makes it a compare-and-set),
--       8 "1" to re-accept (new anchor: accepted time set, count restarted) or "0" to keep them
-- Returns {created (0|1), version}. Errors: NOCOLLECTION, QUOTA <n>, CONFLICT.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOCOLLECTION')
end
local ver = redis.call('HGET', KEYS[4], 'ver')
if ARGV[7] ~= '' and ver ~= ARGV[7] then
  return redis.error_reply('CONFLICT')
end
local created = 0
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 0 then
  local max = tonumber(redis.call('HGET', KEYS[1], 'maxJobCount') or '0') or 0
  if max > 0 and redis.call('SCARD', KEYS[2]) >= max then
    return redis.error_reply('QUOTA ' .. max)
  end
  redis.call('SADD', KEYS[2], ARGV[2])
  created = 1
end
ver = redis.call('HINCRBY', KEYS[4], 'ver', 1)
redis.call('SET', KEYS[3], ARGV[3])
redis.call('HSET', KEYS[4], 'next', ARGV[5], 'state', ARGV[6])
if ARGV[8] == '1' then
  redis.call('HSET', KEYS[4], 'acc', ARGV[4], 'fired', 0)
end
if ARGV[5] ~= '' and ARGV[6] == 'Enabled' and redis.call('HGET', KEYS[1], 'state') ~= 'Disabled' then
  redis.call('ZADD', KEYS[5], ARGV[5], ARGV[1])
else
  redis.call('ZREM', KEYS[5], ARGV[1])
end
return {created, ver}
