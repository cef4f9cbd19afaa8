-- Enables or pauses (Disabled, Suspended) a collection. Pausing takes every job out of the due set. Enabling puts
-- back the jobs the caller computed a next time for (each checked against its version and
-- state; an empty next ends the job Completed: its series ran out while the collection was
-- disabled), then returns the jobs that are still not in the due set: the caller schedules the
-- Enabled ones among them and calls again, so a job put or changed meanwhile is never stranded.
-- KEYS: 1 coll, 2 jobs, 3 due, then for each job to schedule: its st
-- ARGV: 1 state, 2 collection name, then for each job i (KEYS[3+i]): member, next (ms or ""),
--       version
-- Returns the names of the collection's jobs not in the due set (none when disabling).
redis.call('HSET', KEYS[1], 'state', ARGV[1])
if ARGV[1] == 'Disabled' or ARGV[1] == 'Suspended' then
  for _, j in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    redis.call('ZREM', KEYS[3], ARGV[2] .. '/' .. j)
  end
  return {}
end
for i = 4, #KEYS do
  local a = 2 + 3 * (i - 4)
  local cur = redis.call('HMGET', KEYS[i], 'ver', 'state')
  if cur[1] == ARGV[a + 3] and cur[2] == 'Enabled' then
    if ARGV[a + 2] == '' then
      redis.call('HSET', KEYS[i], 'next', '', 'state', 'Completed')
    else
      redis.call('HSET', KEYS[i], 'next', ARGV[a + 2])
      redis.call('ZADD', KEYS[3], ARGV[a + 2], ARGV[a + 1])
    end
  end
end
local left = {}
for _, j in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if not redis.call('ZSCORE', KEYS[3], ARGV[2] .. '/' .. j) then
    left[#left + 1] = j
  end
end
return left
