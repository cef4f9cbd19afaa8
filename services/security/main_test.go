package security

import (
	"fmt"
	"os"
	"testing"

	"github.com/resched/resched/services/internal/testenv"
)

// bin holds the planner, worker and schedctl built once for all the tests of the package.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "resched-security-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	if err := testenv.BuildInto(dir, "planner", "worker", "schedctl"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
