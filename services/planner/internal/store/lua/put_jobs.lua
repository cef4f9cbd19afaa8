-- Stores job definitions of one partition and their next fire times, in order, enforcing each
-- collection's maxJobCount. One call stores a batch: each script call cost Redis 3–4 µs besides
-- its commands (about 31 µs a put in a bulk import with a call each, 28 together).
-- Versions come from the partition's counter, so they never repeat: a job deleted and put again
-- is a new job to every cache and compare-and-set. The version a job is created with is kept
-- as its incarnation ("born"): the results of an attempt of a deleted job, still running at
-- the delete, carry the deleted job's and are not recorded for the job created after it.
--
-- A definition from the intake stream carries its place in the stream (epoch, sequence): the
-- planners apply the stream in parallel, and a message older than the last one applied to the
-- job (kept in its state) or than the delete that removed it (kept in "gone") is stale: it
-- changes nothing. So the job ends as the newest message says, whatever order they arrive in.
-- A job disabled here (it was not) is recorded in "purges" with its incarnation, as a delete
-- records it (delete_job.lua), until its caller has removed its messages from the due stream:
-- its retries waiting there would go on calling its target. Enabled again, the record ends: the
-- messages of the job as enabled are its own.
-- KEYS: 1 due, 2 seq, 3 gone (hash: member -> "epoch:seq" of its delete), 4 gone times (sorted
--       set), 5 purges; then for put i, from k = 5 + 4(i-1): k+1 coll, k+2 jobs (sorted set,
--       score 0: the collection's index), k+3 def, k+4 st
-- ARGV: for put i, from a = 14(i-1): a+1 member, a+2 job name, a+3 definition blob, a+4 accepted
--       (ms), a+5 next (ms, or "" for none), a+6 state, a+7 expected version ("" for any; a
--       number makes it a compare-and-set), a+8 "1" to re-accept (new anchor: accepted time set,
--       count restarted) or "0" to keep them, a+9 "1" to create only (an existing job is left
--       alone), a+10 "" or, with a+7, "=" and the next fire time read (ms, or nothing for none):
--       the stored one must still be it, a+11 stream epoch ("" when not from the intake), a+12
--       stream sequence, a+13 the generation of the collection the job was checked against (""
--       for any; put_collection.lua), a+14 the put's time (ms: a disable's record is dated so)
-- Returns, per put, {created (0|1), version, 1 when the job is due (in the due set) else 0, 1
-- when stale (2: the same message applied before), then the job's status counters as kept:
-- executions, failures, faults, last execution (ms, 0 for none); then 1 when it disabled a job
-- that was not disabled (recorded in purges) else 0, and that job's incarnation}: with what it
-- wrote, the caller has the job as stored without reading it back. A put refused returns "!"
-- and its error instead: NOCOLLECTION, DELETING (the collection's delete is under way:
-- delete_jobs.lua), COLLCHANGED (not the generation checked against), QUOTA <n>, CONFLICT,
-- EXISTS; each put fails alone.
local due, seq, goneH, goneT, purges = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

local function older(stamp, ep, sq)
  -- 1 when stamp ("epoch:seq", or nil) is newer than (ep, sq), 2 when it is (ep, sq) itself (the
  -- same message applied before: a redelivery), else false
  if not stamp then return false end
  local e, s = string.match(stamp, '^(%d+):(%d+)$')
  e, s = tonumber(e), tonumber(s)
  if e == ep and s == sq then return 2 end
  return (e > ep or (e == ep and s > sq)) and 1
end

-- A collection is read once per call: puts do not change it, and a batch's puts are mostly of
-- one collection.
local colls = {}

local function put(collKey, jobsKey, defKey, stKey, a)
  local member, name, blob, accepted, nextAt, state, ifVersion, reaccept, createOnly, ifNext, epoch, sequence, gen, at =
    unpack(ARGV, a + 1, a + 14)
  local coll = colls[collKey]
  if not coll then
    coll = redis.call('HMGET', collKey, 'state', 'maxJobCount', 'gen', 'change')
    colls[collKey] = coll
  end
  if not coll[1] then
    return '!NOCOLLECTION'
  end
  if coll[4] == 'delete' then
    return '!DELETING'
  end
  if gen ~= '' and coll[3] ~= gen then
    return '!COLLCHANGED'
  end
  local exists = redis.call('ZSCORE', jobsKey, name) ~= false
  local ep, sq = tonumber(epoch), tonumber(sequence)
  local gone = false
  if ep then
    local last
    if exists then
      local cur = redis.call('HMGET', stKey, 'iep', 'isq')
      if cur[1] then last = cur[1] .. ':' .. cur[2] end
    else
      last = redis.call('HGET', goneH, member) or nil
      gone = last ~= nil
    end
    local stale = older(last, ep, sq)
    if stale then
      return {0, 0, 0, stale, 0, 0, 0, 0, 0, 0}
    end
  end
  if ifVersion ~= '' then
    local cur = redis.call('HMGET', stKey, 'ver', 'next')
    if cur[1] ~= ifVersion or (ifNext ~= '' and '=' .. (cur[2] or '') ~= ifNext) then
      return '!CONFLICT'
    end
  end
  local created = 0
  if exists and createOnly == '1' then
    return '!EXISTS'
  end
  if not exists then
    local max = tonumber(coll[2] or '0') or 0
    if max > 0 and redis.call('ZCARD', jobsKey) >= max then
      return '!QUOTA ' .. max
    end
    redis.call('ZADD', jobsKey, 0, name)
    created = 1
  end
  -- A job created now has counted nothing yet (a delete removes the state with the job). The
  -- counters are read before the write, which leaves them as they are.
  local cnt, disabled, born = {0, 0, 0, 0}, 0, 0
  if exists then
    local was = redis.call('HMGET', stKey, 'exec', 'fail', 'faulted', 'last', 'state', 'born')
    for i = 1, 4 do
      cnt[i] = tonumber(was[i]) or 0
    end
    local rec = member .. '@' .. (was[6] or '0')
    if state == 'Disabled' and was[5] ~= 'Disabled' then
      disabled, born = 1, tonumber(was[6]) or 0
      redis.call('ZADD', purges, at, rec)
    elseif state == 'Enabled' and was[5] == 'Disabled' then
      redis.call('ZREM', purges, rec)
    end
  end
  local ver = redis.call('INCR', seq)
  redis.call('SET', defKey, blob)
  local fields = {'ver', ver, 'next', nextAt, 'state', state}
  if created == 1 then
    fields[#fields + 1], fields[#fields + 2] = 'born', ver
  end
  if reaccept == '1' then
    fields[#fields + 1], fields[#fields + 2] = 'acc', accepted
    fields[#fields + 1], fields[#fields + 2] = 'fired', 0
  end
  if ep then
    fields[#fields + 1], fields[#fields + 2] = 'iep', ep
    fields[#fields + 1], fields[#fields + 2] = 'isq', sq
  end
  redis.call('HSET', stKey, unpack(fields))
  if gone then
    redis.call('HDEL', goneH, member)
    redis.call('ZREM', goneT, member)
  end
  local isDue = 0
  if nextAt ~= '' and state == 'Enabled' and coll[1] ~= 'Disabled' and coll[1] ~= 'Suspended' then
    redis.call('ZADD', due, nextAt, member)
    isDue = 1
  else
    redis.call('ZREM', due, member)
  end
  return {created, ver, isDue, 0, cnt[1], cnt[2], cnt[3], cnt[4], disabled, born}
end

local out = {}
for i = 1, (#KEYS - 5) / 4 do
  local k = 5 + 4 * (i - 1)
  local ok, res = pcall(put, KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], 14 * (i - 1))
  if ok then
    out[i] = res
  else
    out[i] = '!' .. (type(res) == 'table' and (res.err or '?') or tostring(res))
  end
end
return out
