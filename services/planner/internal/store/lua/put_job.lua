-- Stores a job definition and its next fire time, enforcing the collection's maxJobCount.
-- Versions come from the partition's counter, so they never repeat: a job deleted and put again
-- is a new job to every cache and compare-and-set.
-- KEYS: 1 coll, 2 jobs, 3 def, 4 st, 5 due, 6 seq
-- ARGV: 1 member, 2 job name, 3 definition blob, 4 accepted (ms), 5 next (ms, or "" for none),
--       6 state, 7 expected version ("" for any; a number makes it a compare-and-set),
--       8 "1" to re-accept (new anchor: accepted time set, count restarted) or "0" to keep them,
--       9 "1" to create only (an existing job is left alone), 10 "" or, with 7, "=" and the next
--       fire time read (ms, or nothing for none): the stored one must still be it
-- Returns {created (0|1), version, 1 when the job is due (in the due set) else 0}.
-- Errors: NOCOLLECTION, QUOTA <n>, CONFLICT, EXISTS.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOCOLLECTION')
end
if ARGV[7] ~= '' then
  local cur = redis.call('HMGET', KEYS[4], 'ver', 'next')
  if cur[1] ~= ARGV[7] or (ARGV[10] ~= '' and '=' .. (cur[2] or '') ~= ARGV[10]) then
    return redis.error_reply('CONFLICT')
  end
end
local created = 0
local exists = redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1
if exists and ARGV[9] == '1' then
  return redis.error_reply('EXISTS')
end
if not exists then
  local max = tonumber(redis.call('HGET', KEYS[1], 'maxJobCount') or '0') or 0
  if max > 0 and redis.call('SCARD', KEYS[2]) >= max then
    return redis.error_reply('QUOTA ' .. max)
  end
  redis.call('SADD', KEYS[2], ARGV[2])
  created = 1
end
local ver = redis.call('INCR', KEYS[6])
redis.call('SET', KEYS[3], ARGV[3])
redis.call('HSET', KEYS[4], 'ver', ver, 'next', ARGV[5], 'state', ARGV[6])
if ARGV[8] == '1' then
  redis.call('HSET', KEYS[4], 'acc', ARGV[4], 'fired', 0)
end
if ARGV[5] ~= '' and ARGV[6] == 'Enabled' and redis.call('HGET', KEYS[1], 'state') ~= 'Disabled' then
  redis.call('ZADD', KEYS[5], ARGV[5], ARGV[1])
  return {created, ver, 1}
end
redis.call('ZREM', KEYS[5], ARGV[1])
return {created, ver, 0}
