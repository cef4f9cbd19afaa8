-- Reads due jobs of a partition for its owner. The due set is the schedule itself (score = next
-- fire time, ms): nothing is re-scored, because only the planner holding the partition's lease
-- dispatches it, and every script that moves a job checks that lease (fencing).
-- KEYS: 1 owner, 2 due
-- ARGV: 1 owner token, 2 due by (ms), 3 batch size, 4 due after (ms, exclusive; '-inf': any):
--       the jobs due at or before it wait (an outage still settling)
-- Returns {members..., earliest}: up to a batch of members due after ARGV[4] and by ARGV[2],
-- earliest first, then the earliest score after ARGV[4] in the set ("" when none). Errors:
-- NOTOWNER.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('NOTOWNER')
end
local after = ARGV[4]
if after ~= '-inf' then
  after = '(' .. after
end
local due = redis.call('ZRANGE', KEYS[2], after, ARGV[2], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
local first
if after == '-inf' then
  first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
else
  first = redis.call('ZRANGE', KEYS[2], after, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
end
due[#due + 1] = first[2] or ''
return due
