-- Deletes some jobs of a collection, before the collection itself (delete_collection.lua), so
-- that no call holds Redis for a large collection's every job. The delete is recorded as
-- unfinished (the collection's change, and its name in the partition's unfinished set by the
-- time of this call) until delete_collection.lua ends it, so that a planner takes it up when
-- its caller stopped (jobs.Service.FinishStale).
-- KEYS: 1 jobs, 2 due, 3 coll, 4 the partition's unfinished changes, then for each job: def,
--       st, hist, rid
-- ARGV: 1 collection name, 2 now (ms), then the job names, in the order of their keys
-- Returns how many of them existed.
local n = 0
for i = 3, #ARGV do
  n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[1] .. '/' .. ARGV[i])
end
for i = 5, #KEYS do
  redis.call('DEL', KEYS[i])
end
-- Marked after the deletes: a script's first write decides whether Redis at its maxmemory lets
-- it write, and a delete is let through (freeing memory is what is wanted then).
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('HSET', KEYS[3], 'change', 'delete', 'changeFrom', '')
  redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
end
return n
