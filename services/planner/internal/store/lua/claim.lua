-- Reads due jobs of a partition for its owner. The due set is the schedule itself (score = next
-- fire time, ms): nothing is re-scored, because only the planner holding the partition's lease
-- dispatches it, and every script that moves a job checks that lease (fencing).
-- KEYS: 1 owner, 2 due
-- ARGV: 1 owner token, 2 due by (ms), 3 batch size
-- Returns {members..., earliest}: up to a batch of members due by ARGV[2], earliest first, then
-- the earliest score in the set ("" when empty). Errors: NOTOWNER.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('NOTOWNER')
end
local due = redis.call('ZRANGE', KEYS[2], '-inf', ARGV[2], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
due[#due + 1] = first[2] or ''
return due
