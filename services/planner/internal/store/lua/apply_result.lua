-- Records one attempt reported by a worker: the history entry, the status counters, and the
-- end of the job when this was the final attempt of its last occurrence.
-- KEYS: 1 st, 2 hist, 3 rid (sorted set of applied result ids, scored by when applied)
-- ARGV: 1 history entry (historyline.go), 2 cutoff (ms): older entries are dropped, 3 max entries,
--       4 action name, 5 attempt (0 = first), 6 status, 7 attempt start (ms), 8 final (0|1),
--       9 faulted (0|1), 10 scheduled time of the occurrence (ms), 11 result id ("" for none),
--       12 now (ms), 13 how long result ids are remembered (ms), 14 occurrence number (0 for a
--       run-now, which never ends the job), 15 "1" when this result ends the main action
-- Returns the job's new state when this result ended it ("Completed" or "Faulted"), else "".
-- Read once: the state says whether the job still exists, and the rest whether it ends here.
local st = redis.call('HMGET', KEYS[1], 'state', 'next', 'lastOcc')
if not st[1] then
  return '' -- the job was deleted meanwhile
end
-- A result is acknowledged after it is applied; a planner that dies in between leaves it to be
-- delivered again, possibly after newer results of the same job. Every id applied within the
-- window is remembered, so any redelivery is a no-op. The check comes before the trim, so a
-- redelivery after a long outage of every planner is still recognised.
if ARGV[11] ~= '' then
  if redis.call('ZSCORE', KEYS[3], ARGV[11]) then
    return ''
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', tonumber(ARGV[12]) - tonumber(ARGV[13]))
  redis.call('ZADD', KEYS[3], ARGV[12], ARGV[11])
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
  -- An occurrence counts as executed once, at the result that ends its main action (a success,
  -- the last failed attempt, or the hand-over to the error action): exactly one result per
  -- occurrence says so, whatever attempts were lost with a worker or interleaved with the
  -- attempts of other occurrences.
  if ARGV[15] == '1' then
    redis.call('HINCRBY', KEYS[1], 'exec', 1)
  end
  if ARGV[6] == 'Failed' then
    redis.call('HINCRBY', KEYS[1], 'fail', 1)
  end
end
if ARGV[9] == '1' then
  redis.call('HINCRBY', KEYS[1], 'faulted', 1)
end
if ARGV[8] == '1' and ARGV[14] ~= '0' then
  if st[2] == '' and st[3] == ARGV[10] and st[1] == 'Enabled' then
    local s = ARGV[9] == '1' and 'Faulted' or 'Completed'
    redis.call('HSET', KEYS[1], 'last', ARGV[7], 'finalOcc', ARGV[10], 'finalFault', ARGV[9], 'state', s)
    return s
  end
  redis.call('HSET', KEYS[1], 'last', ARGV[7], 'finalOcc', ARGV[10], 'finalFault', ARGV[9])
  return ''
end
redis.call('HSET', KEYS[1], 'last', ARGV[7])
return ''
