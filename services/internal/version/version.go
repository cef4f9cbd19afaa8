// Package version says which build of resched runs: the version `make build` links in
// (git describe: -X github.com/resched/resched/services/internal/version.linked=…), else the
// module version Go records in the binary, else "(devel)". Every command reports it: the
// planner and the worker in their first log line, /healthz and the API's service info,
// schedctl with --version.
package version

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// linked is set at link time.
var linked string

// String is the version of this build.
func String() string {
	if linked != "" {
		return linked
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "(devel)"
}

var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

var notIdentifier = regexp.MustCompile(`[^0-9A-Za-z-]+`)

// Semver is the version as a semantic version, for what requires one (a NATS micro service):
// a git tag such as v1.2.3-4-gabc1234 without its v, or 0.0.0 with the version as build
// metadata ("0.0.0+f085e2f", "0.0.0+devel").
func Semver() string {
	v := strings.TrimPrefix(String(), "v")
	if semver.MatchString(v) {
		return v
	}
	meta := strings.Trim(notIdentifier.ReplaceAllString(v, "."), ".")
	if meta == "" {
		meta = "devel"
	}
	return "0.0.0+" + meta
}
