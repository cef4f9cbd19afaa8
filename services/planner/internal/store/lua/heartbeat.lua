-- A planner's heartbeat: it says it is alive and records outages of every planner. The last
-- heartbeat of any planner is kept in "alive"; a planner whose process started after that
-- heartbeat plus three periods finds that no planner ran in between, and records the interval, so
-- the dispatcher can tell an occurrence missed while every planner was down (the catch-up
-- policy applies) from one a live planner was only late with (it fires).
--
-- A gap in the heartbeats is not always an outage: when Redis itself was away (a master lost,
-- a failover) the planners lived on without being able to say so. A planner that beats again
-- after such a gap proves that a planner ran through it, and removes every outage recorded over
-- it; the dispatchers act on an outage only once it has stood for a few periods (lease.Settle).
--
-- A planner whose partition count is not the one the data is laid out with, or that beats
-- while the data moves to another count (planner -repartition), is refused: it must not take a
-- lease on a layout it does not have. The move records itself before it looks for live
-- planners, so a planner that checked the layout just before is either seen or refused here.
-- KEYS: 1 planners (sorted set: planner id, scored by when its heartbeat expires), 2 alive,
--       3 outages (list of "<from ms>|<to ms>|<recorded ms>", newest first), 4 meta
-- ARGV: 1 planner id, 2 now (ms), 3 expiry (ms), 4 process start (ms), 5 period (ms): a live
--       planner beats at least this often, 6 outages kept, 7 this planner's previous heartbeat
--       (ms, 0 for none), 8 the planner's partition count
-- Returns {live planners, Redis's clock (seconds), its microseconds, outages...}: a planner
-- compares its own clock with Redis's, the one clock every planner shares.
local layout = redis.call('HMGET', KEYS[4], 'partitions', 'repartition')
if layout[2] then
  return redis.error_reply('REPARTITIONING the data is moving to ' .. layout[2] .. ' partitions')
end
if layout[1] and layout[1] ~= ARGV[8] then
  return redis.error_reply('LAYOUT the data is laid out with ' .. layout[1] .. ' partitions, this planner is set to ' .. ARGV[8])
end
local now, period = tonumber(ARGV[2]), tonumber(ARGV[5])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
local last = tonumber(redis.call('GET', KEYS[2]))
local start = tonumber(ARGV[4])
local prev = tonumber(ARGV[7])
if prev > 0 and now > prev + 3 * period then
  -- This planner ran from prev to now: nothing in between was an outage.
  for _, o in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
    local from, to = string.match(o, '^(%d+)|(%d+)')
    if tonumber(from) < now and tonumber(to) > prev then
      redis.call('LREM', KEYS[3], 0, o)
    end
  end
elseif last and start > last + 3 * period then
  -- A planner that beat at "last" may have lived until its next beat was due, and a beat can
  -- come late on a busy machine: the outage starts two periods after the last beat.
  redis.call('LPUSH', KEYS[3], (last + 2 * period) .. '|' .. start .. '|' .. now)
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[6]) - 1)
end
if not last or now > last then
  redis.call('SET', KEYS[2], now)
end
local clock = redis.call('TIME')
local out = {redis.call('ZCARD', KEYS[1]), clock[1], clock[2]}
for _, o in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  out[#out + 1] = o
end
return out
