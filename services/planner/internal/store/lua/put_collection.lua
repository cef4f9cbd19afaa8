-- Stores a job collection. Each write gives it a new generation from the partition's counter
-- (never repeated, even by a collection deleted and made again): a put of a job names the
-- generation it was checked against (put_jobs.lua), so a planner may keep collections it read.
-- KEYS: 1 colls, 2 coll, 3 the partition's counter, 4 the partition's names in order (the
-- listing's index beside the set an earlier release reads; every score 0), 5 the partition's
-- unfinished changes
-- ARGV: 1 name, 2 definition JSON, 3 state, 4 maxJobCount (0 = no limit), 5 "1" to create only
-- Returns 1 when the collection was created. Errors: EXISTS (create only, and it exists),
-- DELETING (its delete is under way: put after it ends, or the delete would take it too).
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then
  return redis.error_reply('EXISTS')
end
if redis.call('HGET', KEYS[2], 'change') == 'delete' or
    (redis.call('EXISTS', KEYS[2]) == 0 and redis.call('ZSCORE', KEYS[5], ARGV[1])) then
  return redis.error_reply('DELETING')
end
local created = redis.call('SADD', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[4], 0, ARGV[1])
redis.call('HSET', KEYS[2], 'def', ARGV[2], 'state', ARGV[3], 'maxJobCount', ARGV[4], 'gen', redis.call('INCR', KEYS[3]))
return created
