-- Records attempts reported by workers, in order, for jobs of one partition: for each, the
-- history entry, the status counters, and the end of the job when this was the final attempt
-- of its last occurrence. One call records a batch: a call costs Redis about as much as
-- recording one attempt.
-- KEYS: for result i: KEYS[3i-2] st, KEYS[3i-1] hist, KEYS[3i] rid (sorted set of applied
--       result ids, scored by when applied)
-- ARGV: 1 cutoff (ms): older history entries are dropped, 2 max entries, 3 now (ms), 4 how long
--       result ids are remembered (ms); then for result i, from a = 4 + 12(i-1): a+1 history
--       entry (historyline.go), a+2 action name, a+3 status, a+4 attempt start (ms), a+5 final
--       (0|1), a+6 faulted: "0", or "fault:" and the occurrence's execution tag ("1" without
--       one), a+7 scheduled time of the occurrence (ms), a+8 result id (""
--       for none), a+9 occurrence number (0 for a run-now, which never ends the job), a+10
--       "done:" and the occurrence's execution tag when this result ends the main action, else "",
--       a+11 the incarnation of the job the attempt ran for (put_jobs.lua; 0 when unknown),
--       a+12 the deliveries before this one that may have left no result (history.go, lostArg):
--       a line each, the id its result would have had and its history entry, by a tab
-- Returns, per result, the job's new state when this result ended it ("Completed" or
-- "Faulted"), else "", after the number of lost deliveries recorded and ":" when there were
-- some; or "!" and the error that stopped it: each result fails alone, as it did when each had
-- its own call.
local cutoff, maxEntries, now, memory = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])

local function apply(st, hist, rid, a)
  -- Read once: the state says whether the job still exists, and the rest whether it ends here.
  local cur = redis.call('HMGET', st, 'state', 'next', 'lastOcc', 'born', 'last', 'finalOcc')
  if not cur[1] then
    return '' -- the job was deleted meanwhile
  end
  -- An attempt of a job deleted while it ran, reported after a job of the same name was
  -- created: it belongs to the deleted job. (0, or no "born": a release before incarnations.)
  local inc = ARGV[a + 11]
  if inc ~= '0' and cur[4] and cur[4] ~= inc then
    return ''
  end
  -- A result is acknowledged after it is applied; a planner that dies in between leaves it to
  -- be delivered again, possibly after newer results of the same job. Every id applied within
  -- the window is remembered, so any redelivery is a no-op. The check comes before the trim, so
  -- a redelivery after a long outage of every planner is still recognised.
  -- ZADD NX both checks and remembers (a call from Lua costs about what the command does). The
  -- ids older than the window are dropped at every eighth occurrence of a job only: the set
  -- holds a few more, and a redelivery is recognised all the same.
  local id = ARGV[a + 8]
  if id ~= '' then
    if redis.call('ZADD', rid, 'NX', now, id) == 0 then
      return ''
    end
    if tonumber(ARGV[a + 9]) % 8 == 0 then
      redis.call('ZREMRANGEBYSCORE', rid, '-inf', tonumber(now) - memory)
    end
  end
  -- A delivery before this one without a result recorded left none (its worker was killed,
  -- stopped or cut off): it gets an entry of its own, older than this one's, and its result's
  -- id is remembered, so that it gets one once and a result of it coming late is taken for
  -- a copy.
  local lost, told = ARGV[a + 12], ''
  if lost ~= '' then
    local n = 0
    for lid, line in string.gmatch(lost, '([^\t\n]+)\t([^\n]*)\n') do
      if redis.call('ZADD', rid, 'NX', now, lid) == 1 then
        redis.call('LPUSH', hist, line)
        n = n + 1
      end
    end
    if n > 0 then
      told = n .. ':'
    end
  end
  -- LPUSH says the length: the list is trimmed only when it holds too many; the entry of a
  -- job's first attempt, alone in the list, is its own oldest.
  local length = redis.call('LPUSH', hist, ARGV[a + 1])
  if length > maxEntries then
    redis.call('LTRIM', hist, 0, maxEntries - 1)
  end
  local oldest = length == 1 and ARGV[a + 1] or redis.call('LINDEX', hist, -1)
  while oldest and tonumber(string.match(oldest, '^(%d+)|') or cutoff) < cutoff do
    redis.call('RPOP', hist)
    oldest = redis.call('LINDEX', hist, -1)
  end
  local final, fault = ARGV[a + 5], ARGV[a + 6]
  local faulted = fault == '0' and '0' or '1'
  if ARGV[a + 2] == 'MainAction' then
    -- An occurrence counts as executed once, at the result that ends its main action (a
    -- success, the last failed attempt, or the hand-over to the error action), whatever
    -- attempts were lost with a worker or interleaved with the attempts of other occurrences.
    -- Two results may say so: a worker whose link to NATS hung delivered the occurrence, and
    -- reported it once back, after another worker had the redelivery. The occurrence is
    -- remembered with the result ids, and counted once (without a tag: counted).
    local done = ARGV[a + 10]
    if done ~= '' and (done == 'done:' or redis.call('ZADD', rid, 'NX', now, done) == 1) then
      redis.call('HINCRBY', st, 'exec', 1)
    end
    if ARGV[a + 3] == 'Failed' then
      redis.call('HINCRBY', st, 'fail', 1)
    end
  end
  -- An occurrence counts as faulted once too: a delivery past the retry policy runs the last
  -- attempt again and reports it under an id of its own (without a tag: counted).
  if fault ~= '0' and (fault == '1' or redis.call('ZADD', rid, 'NX', now, fault) == 1) then
    redis.call('HINCRBY', st, 'faulted', 1)
  end
  -- Results may be applied out of order: one that Redis refused (at its maxmemory, say) comes
  -- back a second later, after newer ones. The last execution and the last occurrence ended
  -- only move forward, so a late result neither turns the job's last run back nor makes the
  -- series look unfinished to advance.lua.
  local start, scheduled = ARGV[a + 4], ARGV[a + 7]
  local later = not cur[5] or tonumber(start) > tonumber(cur[5])
  if final ~= '1' or ARGV[a + 9] == '0' then
    if later then
      redis.call('HSET', st, 'last', start)
    end
    return told
  end
  local ended = ''
  if cur[2] == '' and cur[3] == scheduled and cur[1] == 'Enabled' then
    ended = faulted == '1' and 'Faulted' or 'Completed'
  end
  if not cur[6] or tonumber(scheduled) >= tonumber(cur[6]) then
    if not later then
      start = cur[5] -- written back as it is: one call whichever fields change
    end
    if ended ~= '' then
      redis.call('HSET', st, 'last', start, 'finalOcc', scheduled, 'finalFault', faulted, 'state', ended)
    else
      redis.call('HSET', st, 'last', start, 'finalOcc', scheduled, 'finalFault', faulted)
    end
  elseif ended ~= '' then -- not expected: an occurrence ended after the last one published
    redis.call('HSET', st, 'last', later and start or cur[5], 'state', ended)
  elseif later then
    redis.call('HSET', st, 'last', start)
  end
  return told .. ended
end

local out = {}
for i = 1, #KEYS / 3 do
  local ok, res = pcall(apply, KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i], 4 + 12 * (i - 1))
  if ok then
    out[i] = res
  else
    out[i] = '!' .. (type(res) == 'table' and (res.err or '?') or tostring(res))
  end
end
return out
