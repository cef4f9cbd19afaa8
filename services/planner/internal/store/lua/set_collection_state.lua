-- Enables or pauses (Disabled, Suspended) a collection, going through its jobs a chunk at a
-- time, each call its own, so that no call holds Redis for a large collection's every job. The
-- first call sets the state; a later call goes on only while the state is still the one it
-- sets (another change, or a delete, overtakes it). Pausing takes the chunk's jobs out of the
-- due set. Enabling first puts back the jobs of the previous chunk the caller computed a next
-- time for (each checked against its version and state; an empty next ends the job Completed:
-- its series ran out while the collection was disabled), then answers the chunk's jobs that
-- are not in the due set, for the caller to compute. A job put once the state is set schedules
-- itself, by the collection's state.
-- Until the change is done it is recorded as unfinished: the collection's hash holds the state
-- it sets (change) and where a call would take it up again (changeFrom: the after of this
-- call, whose chunk the caller may not have scheduled yet), and the partition's unfinished set
-- holds its name by the time of its last call, so that a planner takes a change up whose
-- caller stopped (jobs.Service.FinishStale). A pause stays recorded after its last call, until
-- its caller has removed its jobs' messages from the due stream (end_change.lua).
-- KEYS: 1 coll, 2 jobs, 3 due, 4 the partition's unfinished changes, then for each job to
--       schedule: its st
-- ARGV: 1 state, 2 collection name, 3 "1" for the first call, 4 the last job gone through
--       ("" from the first), 5 the chunk's size, 6 now (ms), then for each job i (KEYS[4+i]):
--       member, next (ms or ""), version
-- Returns {status, last, jobs not in the due set...}: status "done" (no job after last),
-- "more" or "overtaken". Errors: DELETING (a first call while the collection's delete is under
-- way: the delete overtakes every change, and a later call stops at it).
-- One read of the collection: every collection's hash has a state, so none means it is gone.
local coll = redis.call('HMGET', KEYS[1], 'change', 'state')
if coll[1] == 'delete' then
  if ARGV[3] == '1' then
    return redis.error_reply('DELETING')
  end
  return {'overtaken', ''}
end
if ARGV[3] == '1' then
  if not coll[2] then
    return {'overtaken', ''}
  end
  redis.call('HSET', KEYS[1], 'state', ARGV[1])
elseif coll[2] ~= ARGV[1] then
  -- Overtaken. Its record, if still there, is dropped: only a planner of an earlier release
  -- sets a state without recording its change.
  if coll[1] == ARGV[1] then
    redis.call('HDEL', KEYS[1], 'change', 'changeFrom')
    redis.call('ZREM', KEYS[4], ARGV[2])
  end
  return {'overtaken', ''}
end
local pausing = ARGV[1] == 'Disabled' or ARGV[1] == 'Suspended'
if not pausing then
  for i = 5, #KEYS do
    local a = 6 + 3 * (i - 5)
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
if out[1] == 'done' and #out == 2 and not pausing then
  -- Nothing left for the caller either: the change is over.
  redis.call('HDEL', KEYS[1], 'change', 'changeFrom')
  redis.call('ZREM', KEYS[4], ARGV[2])
else
  redis.call('HSET', KEYS[1], 'change', ARGV[1], 'changeFrom', ARGV[4])
  redis.call('ZADD', KEYS[4], ARGV[6], ARGV[2])
end
return out
