-- Gives a partition lease up, if it is still the caller's.
-- KEYS: 1 owner; ARGV: 1 token. Returns 1 when released.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
