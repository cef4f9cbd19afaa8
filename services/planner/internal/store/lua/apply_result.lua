-- Records one attempt reported by a worker: the history entry, the status counters, and the
-- end of the job when this was the final attempt of its last occurrence.
-- KEYS: 1 st, 2 hist
-- ARGV: 1 history entry "<ms>|<json>", 2 cutoff (ms): older entries are dropped, 3 max entries,
--       4 action name, 5 attempt (0 = first), 6 status, 7 attempt start (ms), 8 final (0|1),
--       9 faulted (0|1), 10 scheduled time of the occurrence (ms), 11 result id ("" for none)
-- Returns the job's new state when this result ended it ("Completed" or "Faulted"), else "".
if redis.call('EXISTS', KEYS[1]) == 0 then
  return '' -- the job was deleted meanwhile
end
-- Results are applied one at a time and acknowledged after; a planner that dies in between
-- gets the last one again. Remembering the last id makes that redelivery a no-op.
if ARGV[11] ~= '' then
  if redis.call('HGET', KEYS[1], 'lastResult') == ARGV[11] then
    return ''
  end
  redis.call('HSET', KEYS[1], 'lastResult', ARGV[11])
end
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
local cutoff = tonumber(ARGV[2])
while true do
  local oldest = redis.call('LINDEX', KEYS[2], -1)
  if not oldest or tonumber(string.match(oldest, '^(%d+)|') or cutoff) >= cutoff then
    break
  end
  redis.call('RPOP', KEYS[2])
end
if ARGV[4] == 'MainAction' then
  -- An occurrence counts as executed at its first result, whatever its attempt number: a
  -- worker that died during attempt 0 leaves attempt 1 as the first one reported.
  if redis.call('HGET', KEYS[1], 'execOcc') ~= ARGV[10] then
    redis.call('HSET', KEYS[1], 'execOcc', ARGV[10])
    redis.call('HINCRBY', KEYS[1], 'exec', 1)
  end
  if ARGV[6] == 'Failed' then
    redis.call('HINCRBY', KEYS[1], 'fail', 1)
  end
end
redis.call('HSET', KEYS[1], 'last', ARGV[7])
if ARGV[9] == '1' then
  redis.call('HINCRBY', KEYS[1], 'faulted', 1)
end
if ARGV[8] == '1' then
  redis.call('HSET', KEYS[1], 'finalOcc', ARGV[10], 'finalFault', ARGV[9])
  local st = redis.call('HMGET', KEYS[1], 'next', 'lastOcc', 'state')
  if st[1] == '' and st[2] == ARGV[10] and st[3] == 'Enabled' then
    local s = ARGV[9] == '1' and 'Faulted' or 'Completed'
    redis.call('HSET', KEYS[1], 'state', s)
    return s
  end
end
return ''
