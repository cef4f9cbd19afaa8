-- Takes up a deleted job's purge (delete_job.lua) whose caller stopped before removing the
-- job's messages from the due stream: it moves the record's time to now, so that other
-- planners leave it to this one, unless its time is no longer the one seen (another planner
-- took it) or it ended.
-- KEYS: 1 the partition's purges
-- ARGV: 1 the record ("<c>/<j>@<incarnation>"), 2 its time as seen (ms), 3 now (ms)
-- Returns 1 when taken, 0 otherwise.
local at = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not at or tonumber(at) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
