package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// metricRow is a metric's row in docs/operations.md's tables: its name in the first column.
var metricRow = regexp.MustCompile("(?m)^\\| `(resched_[a-z_]+)` \\|")

// descName is a descriptor's name in its String(), which client_golang gives no getter for.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// CheckMetricsDocumented fails the test unless the metrics register (a service's metrics
// constructor) registers are exactly those docs/operations.md lists under prefix: alerts and
// the Grafana dashboard read the list, so a metric renamed in one place only would leave them
// reading nothing. Descriptors are read rather than gathered, so that a vector without series
// yet counts.
func CheckMetricsDocumented(t *testing.T, prefix string, register func(prometheus.Registerer) error) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(RepoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range metricRow.FindAllStringSubmatch(string(doc), -1) {
		if strings.HasPrefix(m[1], prefix) {
			documented = append(documented, m[1])
		}
	}
	rec := &describer{}
	if err := register(rec); err != nil {
		t.Fatal(err)
	}
	slices.Sort(documented)
	slices.Sort(rec.names)
	if !slices.Equal(slices.Compact(documented), slices.Compact(rec.names)) {
		t.Errorf("metrics %s*: registered %v, docs/operations.md lists %v", prefix, rec.names, documented)
	}
}

// describer is a Registerer that keeps the names its collectors describe.
type describer struct{ names []string }

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := descName.FindStringSubmatch(desc.String()); m != nil {
			d.names = append(d.names, m[1])
		}
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return true }
