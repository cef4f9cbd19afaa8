-- Deletes a job: its definition, state, history, applied result ids and place in the due set.
-- KEYS: 1 jobs, 2 def, 3 st, 4 hist, 5 due, 6 rid
-- ARGV: 1 member, 2 job name
-- Returns 1 when the job existed.
local existed = redis.call('SREM', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[6])
redis.call('ZREM', KEYS[5], ARGV[1])
return existed
