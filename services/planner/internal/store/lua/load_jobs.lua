-- Reads jobs of one partition as one transaction does (Store.LoadClaimed), for when Redis is
-- at its maxmemory: it then refuses every command queued in a MULTI, reads too, but runs a
-- script that only reads. A job's definition and state are read together, so they belong to
-- one version.
-- KEYS: for job i, KEYS[2i-1] def, KEYS[2i] st
-- ARGV: 1 the number of state fields n, 2..n+1 the fields, then for job i ARGV[n+1+i]: "1" to
--       read its definition, "0" to leave it
-- Returns for job i: [2i-1] the definition (false when missing or left), [2i] the fields' values.
local n = tonumber(ARGV[1])
local fields = {}
for f = 1, n do
  fields[f] = ARGV[1 + f]
end
local out = {}
for i = 1, #KEYS / 2 do
  local def = false
  if ARGV[n + 1 + i] == '1' then
    def = redis.call('GET', KEYS[2 * i - 1])
  end
  out[2 * i - 1] = def
  out[2 * i] = redis.call('HMGET', KEYS[2 * i], unpack(fields))
end
return out
