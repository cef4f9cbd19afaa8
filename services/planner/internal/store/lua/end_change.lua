-- Ends a collection's pause (Disabled or Suspended) once its jobs' messages are gone from the
-- due stream too: set_collection_state.lua keeps its record until then, so that a planner
-- stopped before the purge leaves it for another. A change that overtook it (another state, a
-- delete) keeps its own record.
-- KEYS: 1 coll, 2 the partition's unfinished changes
-- ARGV: 1 collection name, 2 the state the pause set
if redis.call('HGET', KEYS[1], 'change') == ARGV[2] then
  redis.call('HDEL', KEYS[1], 'change', 'changeFrom')
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return 1
