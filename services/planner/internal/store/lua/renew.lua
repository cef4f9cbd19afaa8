-- Extends a partition lease its holder still has.
-- KEYS: 1 owner; ARGV: 1 token, 2 ttl (ms). Returns 1 when renewed, 0 when the lease is lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
