-- Takes a partition lease that is free. A script rather than SET NX so that, on Redis 7 and
-- later, it runs with the allow-oom flag (Store.UseScriptFlags): Redis at its maxmemory refuses
-- SET, and a partition whose planner died then stayed without one until memory was freed.
-- KEYS: 1 owner; ARGV: 1 token, 2 ttl (ms). Returns 1 when taken, 0 when another holds it.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return 0
