-- Stores a job collection.
-- KEYS: 1 colls, 2 coll
-- ARGV: 1 name, 2 definition JSON, 3 state, 4 maxJobCount (0 = no limit)
-- Returns 1 when the collection was created.
local created = redis.call('SADD', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'def', ARGV[2], 'state', ARGV[3], 'maxJobCount', ARGV[4])
return created
