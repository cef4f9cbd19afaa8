-- Deletes some jobs of a collection, before the collection itself (delete_collection.lua), so
-- that no call holds Redis for a large collection's every job.
-- KEYS: 1 jobs, 2 due, then for each job: def, st, hist, rid
-- ARGV: 1 collection name, then the job names, in the order of their keys
-- Returns how many of them existed.
local n = 0
for i = 2, #ARGV do
  n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[1] .. '/' .. ARGV[i])
end
for i = 3, #KEYS do
  redis.call('DEL', KEYS[i])
end
return n
