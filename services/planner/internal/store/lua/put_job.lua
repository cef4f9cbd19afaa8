-- Stores a job definition and its next fire time, enforcing the collection's maxJobCount.
-- Versions come from the partition's counter, so they never repeat: a job deleted and put again
-- is a new job to every cache and compare-and-set.
--
-- A definition from the intake stream carries its place in the stream (epoch, sequence): the
-- planners apply the stream in parallel, and a message older than the last one applied to the
-- job (kept in its state) or than the delete that removed it (kept in "gone") is stale: it
-- changes nothing. So the job ends as the newest message says, whatever order they arrive in.
-- KEYS: 1 coll, 2 jobs (sorted set, score 0: the collection's index), 3 def, 4 st, 5 due,
--       6 seq, 7 gone (hash: member -> "epoch:seq" of its delete), 8 gone times (sorted set)
-- ARGV: 1 member, 2 job name, 3 definition blob, 4 accepted (ms), 5 next (ms, or "" for none),
--       6 state, 7 expected version ("" for any; a number makes it a compare-and-set),
--       8 "1" to re-accept (new anchor: accepted time set, count restarted) or "0" to keep them,
--       9 "1" to create only (an existing job is left alone), 10 "" or, with 7, "=" and the next
--       fire time read (ms, or nothing for none): the stored one must still be it,
--       11 stream epoch ("" when not from the intake), 12 stream sequence, 13 the generation of
--       the collection the job was checked against ("" for any; put_collection.lua)
-- Returns {created (0|1), version, 1 when the job is due (in the due set) else 0, 1 when stale,
-- then the job's status counters as kept: executions, failures, faults, last execution (ms, 0
-- for none)}: with what it wrote, the caller has the job as stored without reading it back.
-- Errors: NOCOLLECTION, COLLCHANGED (not the generation checked against), QUOTA <n>, CONFLICT,
-- EXISTS.
local function older(stamp, ep, sq)
  -- stamp ("epoch:seq", or nil) is at least as new as (ep, sq)
  if not stamp then return false end
  local e, s = string.match(stamp, '^(%d+):(%d+)$')
  e, s = tonumber(e), tonumber(s)
  return e > ep or (e == ep and s >= sq)
end
local coll = redis.call('HMGET', KEYS[1], 'state', 'maxJobCount', 'gen')
if not coll[1] then
  return redis.error_reply('NOCOLLECTION')
end
if ARGV[13] ~= '' and coll[3] ~= ARGV[13] then
  return redis.error_reply('COLLCHANGED')
end
local exists = redis.call('ZSCORE', KEYS[2], ARGV[2]) ~= false
local ep, sq = tonumber(ARGV[11]), tonumber(ARGV[12])
local gone = false
if ep then
  local last
  if exists then
    local cur = redis.call('HMGET', KEYS[4], 'iep', 'isq')
    if cur[1] then last = cur[1] .. ':' .. cur[2] end
  else
    last = redis.call('HGET', KEYS[7], ARGV[1]) or nil
    gone = last ~= nil
  end
  if older(last, ep, sq) then
    return {0, 0, 0, 1, 0, 0, 0, 0}
  end
end
if ARGV[7] ~= '' then
  local cur = redis.call('HMGET', KEYS[4], 'ver', 'next')
  if cur[1] ~= ARGV[7] or (ARGV[10] ~= '' and '=' .. (cur[2] or '') ~= ARGV[10]) then
    return redis.error_reply('CONFLICT')
  end
end
local created = 0
if exists and ARGV[9] == '1' then
  return redis.error_reply('EXISTS')
end
if not exists then
  local max = tonumber(coll[2] or '0') or 0
  if max > 0 and redis.call('ZCARD', KEYS[2]) >= max then
    return redis.error_reply('QUOTA ' .. max)
  end
  redis.call('ZADD', KEYS[2], 0, ARGV[2])
  created = 1
end
local ver = redis.call('INCR', KEYS[6])
redis.call('SET', KEYS[3], ARGV[3])
local fields = {'ver', ver, 'next', ARGV[5], 'state', ARGV[6]}
if ARGV[8] == '1' then
  fields[#fields + 1], fields[#fields + 2] = 'acc', ARGV[4]
  fields[#fields + 1], fields[#fields + 2] = 'fired', 0
end
if ep then
  fields[#fields + 1], fields[#fields + 2] = 'iep', ep
  fields[#fields + 1], fields[#fields + 2] = 'isq', sq
end
redis.call('HSET', KEYS[4], unpack(fields))
if gone then
  redis.call('HDEL', KEYS[7], ARGV[1])
  redis.call('ZREM', KEYS[8], ARGV[1])
end
local cnt = redis.call('HMGET', KEYS[4], 'exec', 'fail', 'faulted', 'last')
for i = 1, 4 do
  cnt[i] = tonumber(cnt[i]) or 0
end
local due = 0
if ARGV[5] ~= '' and ARGV[6] == 'Enabled' and coll[1] ~= 'Disabled' then
  redis.call('ZADD', KEYS[5], ARGV[5], ARGV[1])
  due = 1
else
  redis.call('ZREM', KEYS[5], ARGV[1])
end
return {created, ver, due, 0, cnt[1], cnt[2], cnt[3], cnt[4]}
