-- Claims due jobs: members scored at or before now are re-scored to the end of a lease, so no
-- other planner claims them while this one publishes; if this planner dies, the lease runs out
-- and another claims them again. The scheduled time itself stays in the job's state ("next").
-- KEYS: 1 due
-- ARGV: 1 due by (ms), 2 lease end (ms), 3 batch size
-- Returns the claimed members.
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
if #due == 0 then
  return due
end
local args = {}
for i, m in ipairs(due) do
  args[2 * i - 1] = ARGV[2]
  args[2 * i] = m
end
redis.call('ZADD', KEYS[1], 'XX', unpack(args))
return due
