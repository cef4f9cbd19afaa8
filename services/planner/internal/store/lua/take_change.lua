-- Takes up a collection's unfinished change (a state change or delete whose caller stopped):
-- it moves the change's time to now, so that other planners leave it to this one, unless its
-- time is no longer the one the caller saw (another call or planner is at it) or it ended.
-- KEYS: 1 the partition's unfinished changes, 2 coll
-- ARGV: 1 collection name, 2 the change's time as seen (ms), 3 now (ms)
-- Returns {change, changeFrom}, or nil when not taken. A name whose collection is gone is a
-- delete whose messages may still be on the due stream (delete_collection.lua); one whose
-- collection records no change (changed by an earlier release, which does not know the set)
-- is dropped.
local at = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not at or tonumber(at) ~= tonumber(ARGV[2]) then
  return false
end
-- Every collection's hash has a state: none means the collection is gone.
local ch = redis.call('HMGET', KEYS[2], 'change', 'changeFrom', 'state')
if not ch[3] then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  return {'delete', ''}
end
if not ch[1] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return false
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return {ch[1], ch[2] or ''}
