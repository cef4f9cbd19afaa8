-- Reads claimed jobs for dispatch: what firing needs from each job's state, and its definition
-- only when the caller does not hold that version compiled already (a hot job's definition is
-- not read again at every fire). One script, so each job's state and definition are one
-- consistent read.
-- KEYS: for job i: KEYS[2i-1] st, KEYS[2i] def
-- ARGV: for job i: ARGV[i] the version the caller holds ("" for none)
-- Returns, per job, false when it no longer exists, else {ver, acc, next, fired, occ, state,
-- definition (false when the caller holds this version)}.
local out = {}
for i = 1, #ARGV do
  local st = redis.call('HMGET', KEYS[2 * i - 1], 'ver', 'acc', 'next', 'fired', 'occ', 'state')
  local def = false
  if st[1] and st[1] ~= ARGV[i] then
    def = redis.call('GET', KEYS[2 * i])
  end
  if not st[1] or (st[1] ~= ARGV[i] and not def) then
    out[i] = false -- deleted (a delete removes both)
  else
    st[7] = def
    out[i] = st
  end
end
return out
