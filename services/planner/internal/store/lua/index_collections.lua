-- Builds a partition's index of collection names (a sorted set, every score 0, that a listing
-- pages by name) again from its set of names, which every release writes: at a planner's first
-- start of a release that keeps the index, and when a listing finds the two disagree (an
-- earlier release's planner created or deleted a collection during a rolling upgrade).
-- KEYS: 1 colls, 2 the partition's names in order
-- Returns the number of names indexed.
local names = redis.call('SMEMBERS', KEYS[1])
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
