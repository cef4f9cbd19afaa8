-- Ends a collection's delete once its messages are gone from the due stream too
-- (delete_collection.lua): its name leaves the partition's unfinished changes, unless the
-- collection exists again (made by a planner of an earlier release, which does not look).
-- KEYS: 1 the partition's unfinished changes, 2 coll
-- ARGV: 1 collection name
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return 1
