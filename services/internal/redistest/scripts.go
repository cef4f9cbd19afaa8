package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// ScriptCalls runs do and answers the script calls the server ran meanwhile and the most keys
// one of them was given, read from its slow log with every command logged: a test of how much
// one call may do (a large collection's jobs a chunk at a time) counts what Redis saw.
func (s *Server) ScriptCalls(t testing.TB, do func()) (calls, mostKeys int) {
	t.Helper()
	ctx := context.Background()
	rdb := s.Client(t)
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	do()
	logged, err := rdb.SlowLogGet(ctx, 100000).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logged {
		if len(l.Args) > 2 && (strings.EqualFold(l.Args[0], "evalsha") || strings.EqualFold(l.Args[0], "eval")) {
			keys, _ := strconv.Atoi(l.Args[2])
			calls, mostKeys = calls+1, max(mostKeys, keys)
		}
	}
	return calls, mostKeys
}
