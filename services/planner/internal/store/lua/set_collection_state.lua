-- Enables or pauses (Disabled, Suspended) a collection, going through its jobs a chunk at a
-- time, each call its own, so that no call holds Redis for a large collection's every job. The
-- first call sets the state; a later call goes on only while the state is still the one it
-- sets (another change, or a delete, overtakes it). Pausing takes the chunk's jobs out of the
-- due set. Enabling first puts back the jobs of the previous chunk the caller computed a next
-- time for (each checked against its version and state; an empty next ends the job Completed:
-- its series ran out while the collection was disabled), then answers the chunk's jobs that
-- are not in the due set, for the caller to compute. A job put once the state is set schedules
-- itself, by the collection's state.
-- KEYS: 1 coll, 2 jobs, 3 due, then for each job to schedule: its st
-- ARGV: 1 state, 2 collection name, 3 "1" for the first call, 4 the last job gone through
--       ("" from the first), 5 the chunk's size, then for each job i (KEYS[3+i]): member,
--       next (ms or ""), version
-- Returns {status, last, jobs not in the due set...}: status "done" (no job after last),
-- "more" or "overtaken".
if ARGV[3] == '1' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return {'overtaken', ''}
  end
  redis.call('HSET', KEYS[1], 'state', ARGV[1])
elseif redis.call('HGET', KEYS[1], 'state') ~= ARGV[1] then
  return {'overtaken', ''}
end
local pausing = ARGV[1] == 'Disabled' or ARGV[1] == 'Suspended'
if not pausing then
  for i = 4, #KEYS do
    local a = 5 + 3 * (i - 4)
    local cur = redis.call('HMGET', KEYS[i], 'ver', 'state')
    if cur[1] == ARGV[a + 3] and cur[2] == 'Enabled' then
      if ARGV[a + 2] == '' then
        redis.call('HSET', KEYS[i], 'next', '', 'state', 'Completed')
      else
        redis.call('HSET', KEYS[i], 'next', ARGV[a + 2])
        redis.call('ZADD', KEYS[3], ARGV[a + 2], ARGV[a + 1])
      end
    end
  end
end
local from = '-'
if ARGV[4] ~= '' then
  from = '(' .. ARGV[4]
end
local size = tonumber(ARGV[5])
local names = redis.call('ZRANGEBYLEX', KEYS[2], from, '+', 'LIMIT', 0, size)
local out = {'more', names[#names] or ARGV[4]}
if #names < size then
  out[1] = 'done'
end
for _, j in ipairs(names) do
  local m = ARGV[2] .. '/' .. j
  if pausing then
    redis.call('ZREM', KEYS[3], m)
  elseif not redis.call('ZSCORE', KEYS[3], m) then
    out[#out + 1] = j
  end
end
return out
