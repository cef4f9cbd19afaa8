-- Enables or disables a collection. Disabling takes every job out of the due set; enabling puts
-- back the jobs the caller computed a next time for (each checked against its version).
-- KEYS: 1 coll, 2 jobs, 3 due, then for each job to schedule: its st
-- ARGV: 1 state, 2 collection name, then for each job i (KEYS[3+i]): member, next (ms), version
-- Returns the number of jobs scheduled.
redis.call('HSET', KEYS[1], 'state', ARGV[1])
if ARGV[1] == 'Disabled' then
  for _, j in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    redis.call('ZREM', KEYS[3], ARGV[2] .. '/' .. j)
  end
  return 0
end
local n = 0
for i = 4, #KEYS do
  local a = 2 + 3 * (i - 4)
  if redis.call('HGET', KEYS[i], 'ver') == ARGV[a + 3] and redis.call('HGET', KEYS[i], 'state') == 'Enabled' then
    redis.call('HSET', KEYS[i], 'next', ARGV[a + 2])
    redis.call('ZADD', KEYS[3], ARGV[a + 2], ARGV[a + 1])
    n = n + 1
  end
end
return n
