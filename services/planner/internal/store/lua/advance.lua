-- Moves claimed jobs on after their occurrence was published (or skipped). A job changed since
-- the claim (put again, patched, disabled, deleted) no longer has the claimed "next" and is left
-- as that change left it.
-- KEYS: 1 due, then for job i: KEYS[2i] st, KEYS[2i+1] coll
-- ARGV: for job i, from a = 6(i-1): a+1 member, a+2 claimed next (ms), a+3 new next (ms or ""),
--       a+4 fired, a+5 occurrence number, a+6 published occurrence (ms, or "" when skipped)
-- Returns a flat list {member, new state, …} of jobs that ended here (Completed or Faulted).
local ended = {}
local collState = {} -- one look per collection: a batch holds many jobs of few collections
-- The due set's changes are gathered and made in a few calls: a call from Lua costs about as
-- much as the change itself.
local rescore, remove = {}, {}
local function flush(force)
  if #rescore >= 1000 or (force and #rescore > 0) then
    redis.call('ZADD', KEYS[1], unpack(rescore))
    rescore = {}
  end
  if #remove >= 500 or (force and #remove > 0) then
    redis.call('ZREM', KEYS[1], unpack(remove))
    remove = {}
  end
end
for i = 1, (#KEYS - 1) / 2 do
  local st, coll, a = KEYS[2 * i], KEYS[2 * i + 1], 6 * (i - 1)
  local member, nxt = ARGV[a + 1], ARGV[a + 3]
  local cur = redis.call('HMGET', st, 'next', 'state')
  if cur[1] == ARGV[a + 2] then
    if ARGV[a + 6] ~= '' then
      redis.call('HSET', st, 'next', nxt, 'fired', ARGV[a + 4], 'occ', ARGV[a + 5], 'lastOcc', ARGV[a + 6])
    else
      redis.call('HSET', st, 'next', nxt, 'fired', ARGV[a + 4], 'occ', ARGV[a + 5])
    end
    local state = cur[2]
    if collState[coll] == nil then
      collState[coll] = redis.call('HGET', coll, 'state') or ''
    end
    if nxt ~= '' and state == 'Enabled' and collState[coll] ~= 'Disabled' then
      rescore[#rescore + 1] = nxt
      rescore[#rescore + 1] = member
    else
      remove[#remove + 1] = member
    end
    if nxt == '' and state == 'Enabled' then
      -- The series is over. It ends now unless its last published occurrence is still running;
      -- then the result of that occurrence ends it (apply_result.lua), or already did.
      local fin = redis.call('HMGET', st, 'lastOcc', 'finalOcc', 'finalFault')
      local last = fin[1]
      if not last or last == fin[2] then
        local s = (last and fin[3] == '1') and 'Faulted' or 'Completed'
        redis.call('HSET', st, 'state', s)
        ended[#ended + 1] = member
        ended[#ended + 1] = s
      end
    end
    flush(false)
  end
end
flush(true)
return ended
