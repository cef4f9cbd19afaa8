-- Deletes a job: its definition, state, history, applied result ids and place in the due set.
-- A delete from the intake stream carries its place in the stream (see put_jobs.lua): it is
-- stale when the job holds a newer message, and otherwise it is remembered in "gone" (for
-- ARGV[6] ms at least), so that an older put arriving after it does not bring the job back.
-- A job that existed is recorded in "purges" with its incarnation until its caller has removed
-- its messages from the due stream (a retry or error action waiting there would still call
-- its target): a planner killed in between leaves the record, for another to purge.
-- KEYS: 1 jobs, 2 def, 3 st, 4 hist, 5 due, 6 rid, 7 gone, 8 gone times, 9 purges
-- ARGV: 1 member, 2 job name, 3 stream epoch ("" when not from the intake), 4 stream sequence,
--       5 now (ms), 6 how long a delete is remembered (ms)
-- Returns {1, incarnation} when the job existed, {0} when it did not, {-1} when the delete is
-- stale, {-2} when it is the message applied last (a redelivery).
local ep, sq = tonumber(ARGV[3]), tonumber(ARGV[4])
if ep then
  local cur = redis.call('HMGET', KEYS[3], 'iep', 'isq')
  local last = cur[1] and (cur[1] .. ':' .. cur[2]) or redis.call('HGET', KEYS[7], ARGV[1])
  if last then
    local e, s = string.match(last, '^(%d+):(%d+)$')
    e, s = tonumber(e), tonumber(s)
    if e == ep and s == sq then
      return {-2}
    end
    if e > ep or (e == ep and s > sq) then
      return {-1}
    end
  end
end
local born = redis.call('HGET', KEYS[3], 'born') or '0'
local existed = redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[6])
redis.call('ZREM', KEYS[5], ARGV[1])
if existed == 1 then
  redis.call('ZADD', KEYS[9], ARGV[5], ARGV[1] .. '@' .. born)
end
if ep then
  local now = tonumber(ARGV[5])
  redis.call('HSET', KEYS[7], ARGV[1], ep .. ':' .. sq)
  redis.call('ZADD', KEYS[8], now, ARGV[1])
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', now - tonumber(ARGV[6]), 'LIMIT', 0, 100)) do
    redis.call('HDEL', KEYS[7], m)
    redis.call('ZREM', KEYS[8], m)
  end
end
if existed == 1 then
  return {1, born}
end
return {0}
