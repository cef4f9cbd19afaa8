-- Builds a sorted set of names (every score 0, in order: a listing pages by name) from a set
-- of them. A collection's job index, a set in earlier versions, turns into one in place, once,
-- at a planner's start; a partition's index of collection names is built beside its set at the
-- first start of a release that keeps it, and when a listing finds the two out of step (a
-- planner of an earlier release wrote the set alone during a rolling upgrade).
-- KEYS: 1 the set, 2 the sorted set (the same key: the set turns into it, and a sorted set
-- already there is left as it is)
-- Returns the number of names indexed.
local kind = redis.call('TYPE', KEYS[1]).ok
if KEYS[1] == KEYS[2] and kind ~= 'set' then
  return 0
end
local names = {}
if kind == 'set' then
  names = redis.call('SMEMBERS', KEYS[1])
end
redis.call('DEL', KEYS[2])
for i = 1, #names, 1000 do
  local args = {}
  for k = i, math.min(i + 999, #names) do
    args[#args + 1] = 0
    args[#args + 1] = names[k]
  end
  redis.call('ZADD', KEYS[2], unpack(args))
end
return #names
