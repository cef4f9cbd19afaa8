-- Deletes a collection and every job in it.
-- KEYS: 1 colls, 2 coll, 3 jobs, 4 due, 5 the partition's names in order, 6 the partition's
-- unfinished changes (a delete that took several calls ends here), then for each job: def, st,
-- hist, rid
-- ARGV: 1 name, then the job names, in the order of their keys
-- Errors: RETRY when the jobs changed since the caller listed them.
if redis.call('ZCARD', KEYS[3]) ~= #ARGV - 1 then
  return redis.error_reply('RETRY')
end
for i = 2, #ARGV do
  if not redis.call('ZSCORE', KEYS[3], ARGV[i]) then
    return redis.error_reply('RETRY')
  end
  redis.call('ZREM', KEYS[4], ARGV[1] .. '/' .. ARGV[i])
end
for i = 7, #KEYS do
  redis.call('DEL', KEYS[i])
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
return redis.call('SREM', KEYS[1], ARGV[1])
