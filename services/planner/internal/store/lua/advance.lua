-- Moves dispatched jobs on after their occurrences were published (or skipped), for the owner of
-- the partition. A job changed since it was read (put again, patched, disabled, deleted,
-- re-created) no longer has the version and next time it was read with, and is left as that
-- change left it.
-- KEYS: 1 owner, 2 due, then for job i: KEYS[3i] st, KEYS[3i+1] coll, KEYS[3i+2] hist
-- ARGV: 1 owner token, 2 history max entries, then for job i, from a = 2 + 10(i-1):
--   a+1 member, a+2 next read (ms), a+3 version read, a+4 new next (ms or ""), a+5 due score
--   (ms or ""; a catch-up that paces itself is due before its next), a+6 fired, a+7 occurrence
--   number, a+8 last published occurrence (ms, or "" when none), a+9 state to set ("" to keep;
--   "Faulted" parks a job whose definition no longer compiles), a+10 history lines, one per line
--   ("" for none)
-- Returns {earliest, member, new state, ...}: the earliest score left in the due set ("" when
-- empty), then the jobs that ended here (Completed or Faulted). Errors: NOTOWNER.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('NOTOWNER')
end
local out = {''}
local collState = {} -- one look per collection: a batch holds many jobs of few collections
local histMax = tonumber(ARGV[2])
-- The due set's changes are gathered and made in a few calls: a call from Lua costs about as
-- much as the change itself.
local rescore, remove = {}, {}
local function flush(force)
  if #rescore >= 1000 or (force and #rescore > 0) then
    redis.call('ZADD', KEYS[2], unpack(rescore))
    rescore = {}
  end
  if #remove >= 500 or (force and #remove > 0) then
    redis.call('ZREM', KEYS[2], unpack(remove))
    remove = {}
  end
end
for i = 1, (#KEYS - 2) / 3 do
  local st, coll, hist, a = KEYS[3 * i], KEYS[3 * i + 1], KEYS[3 * i + 2], 2 + 10 * (i - 1)
  local member, nxt, score = ARGV[a + 1], ARGV[a + 4], ARGV[a + 5]
  local cur = redis.call('HMGET', st, 'ver', 'next', 'state')
  if cur[1] == ARGV[a + 3] and cur[2] == ARGV[a + 2] then
    if ARGV[a + 10] ~= '' then
      -- One entry per line, oldest first (a history line is compact JSON: it holds no raw
      -- newline), so that the newest ends at the head of the list.
      for line in string.gmatch(ARGV[a + 10], '[^\n]+') do
        redis.call('LPUSH', hist, line)
      end
      redis.call('LTRIM', hist, 0, histMax - 1)
    end
    local state = cur[3]
    if ARGV[a + 9] ~= '' then
      state = ARGV[a + 9]
      nxt = ''
      redis.call('HSET', st, 'next', '', 'state', state)
      out[#out + 1] = member
      out[#out + 1] = state
    elseif ARGV[a + 8] ~= '' then
      redis.call('HSET', st, 'next', nxt, 'fired', ARGV[a + 6], 'occ', ARGV[a + 7], 'lastOcc', ARGV[a + 8])
    else
      redis.call('HSET', st, 'next', nxt, 'fired', ARGV[a + 6], 'occ', ARGV[a + 7])
    end
    if collState[coll] == nil then
      collState[coll] = redis.call('HGET', coll, 'state') or ''
    end
    if nxt ~= '' and state == 'Enabled' and collState[coll] ~= 'Disabled' and collState[coll] ~= 'Suspended' then
      rescore[#rescore + 1] = score
      rescore[#rescore + 1] = member
    else
      remove[#remove + 1] = member
    end
    if nxt == '' and state == 'Enabled' then
      -- The series is over. It ends now unless its last published occurrence is still running;
      -- then the result of that occurrence ends it (apply_results.lua), or already did.
      local fin = redis.call('HMGET', st, 'lastOcc', 'finalOcc', 'finalFault')
      local last = fin[1]
      if not last or last == fin[2] then
        local s = (last and fin[3] == '1') and 'Faulted' or 'Completed'
        redis.call('HSET', st, 'state', s)
        out[#out + 1] = member
        out[#out + 1] = s
      end
    end
    flush(false)
  end
end
flush(true)
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
out[1] = first[2] or ''
return out
