-- Deletes a collection and every job in it. The delete stays recorded in the partition's
-- unfinished changes (by now) until the caller has also removed the collection's messages from
-- the due stream (end_delete.lua), so that a planner does that when its caller stopped in
-- between (jobs.Service.FinishStale), and the name takes no put meanwhile (put_collection.lua).
-- KEYS: 1 colls, 2 coll, 3 jobs, 4 due, 5 the partition's names in order, 6 the partition's
-- unfinished changes, then for each job: def, st, hist, rid
-- ARGV: 1 name, 2 now (ms), then the job names, in the order of their keys
-- Returns 1 when the collection existed. Errors: RETRY when the jobs changed since the caller
-- listed them.
if redis.call('ZCARD', KEYS[3]) ~= #ARGV - 2 then
  return redis.error_reply('RETRY')
end
for i = 3, #ARGV do
  if not redis.call('ZSCORE', KEYS[3], ARGV[i]) then
    return redis.error_reply('RETRY')
  end
  redis.call('ZREM', KEYS[4], ARGV[1] .. '/' .. ARGV[i])
end
for i = 7, #KEYS do
  redis.call('DEL', KEYS[i])
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[5], ARGV[1])
local existed = redis.call('SREM', KEYS[1], ARGV[1])
if existed == 1 then
  redis.call('ZADD', KEYS[6], ARGV[2], ARGV[1])
end
return existed
