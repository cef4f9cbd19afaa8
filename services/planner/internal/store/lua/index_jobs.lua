-- Turns a collection's job index from the set of earlier versions into the sorted set (every
-- score 0, names in order) that pages by name. Run once per collection at a planner's start.
-- KEYS: 1 jobs
-- Returns the number of names moved.
if redis.call('TYPE', KEYS[1]).ok ~= 'set' then
  return 0
end
local names = redis.call('SMEMBERS', KEYS[1])
redis.call('DEL', KEYS[1])
for i = 1, #names, 1000 do
  local args = {}
  for k = i, math.min(i + 999, #names) do
    args[#args + 1] = 0
    args[#args + 1] = names[k]
  end
  redis.call('ZADD', KEYS[1], unpack(args))
end
return #names
