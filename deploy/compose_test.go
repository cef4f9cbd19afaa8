package deploy

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

const composeFile = "docker-compose.yml"

// scalableServices must run as `docker compose up --scale <name>=N`.
var scalableServices = []string{"worker"}

// composeCheck inspects a loaded project and returns what is wrong with it.
type composeCheck func(p *types.Project) []string

// composeChecks are every check TestComposeFile runs, by name.
var composeChecks = map[string]composeCheck{
	"build files":       checkBuildFiles,
	"dependencies":      checkDependencies,
	"host ports":        checkHostPorts,
	"scalable services": checkScalable,
	"environment":       checkEnvironment,
	"service URLs":      checkServiceURLs,
	"listen ports":      checkListenPorts,
	"services present":  checkServicesPresent,
	"example jobs":      checkExampleJobs,
	"grace periods":     checkGracePeriods,
	"authentication":    checkComposeAuthentication,
}

// gracePeriods are the shortest stops compose must allow (docs/operations.md): the planner its
// 30 s shutdown timeout, a worker its 30 s for the deliveries in flight and 10 s to drain NATS.
var gracePeriods = map[string]time.Duration{"planner": 35 * time.Second, "worker": 40 * time.Second}

func checkGracePeriods(p *types.Project) []string {
	var problems []string
	for name, least := range gracePeriods {
		s, ok := p.Services[name]
		if !ok {
			continue
		}
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) < least {
			problems = append(problems, fmt.Sprintf("%s: stop_grace_period %v, want at least %v", name, s.StopGracePeriod, least))
		}
	}
	return problems
}

// loadCompose loads a compose file the way `docker compose` would, with the repository root as
// project directory and an empty environment, so only the file's own defaults apply.
func loadCompose(t *testing.T, content []byte) *types.Project {
	t.Helper()
	p, err := load(content)
	if err != nil {
		t.Fatalf("load %s: %v", composeFile, err)
	}
	return p
}

func load(content []byte) (*types.Project, error) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return nil, err
	}
	details := types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, composeFile), Content: content}},
		Environment: types.Mapping{},
	}
	return loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("resched", true)
	})
}

func readCompose(t *testing.T) []byte {
	t.Helper()
	content, err := os.ReadFile(filepath.Join(repoRoot, composeFile))
	if err != nil {
		t.Fatal(err)
	}
	return content
}

func TestComposeFile(t *testing.T) {
	p := loadCompose(t, readCompose(t))
	for name, check := range composeChecks {
		t.Run(name, func(t *testing.T) {
			for _, problem := range check(p) {
				t.Error(problem)
			}
		})
	}
}

// TestComposeVariablesHaveDefaults: `docker compose up` must work with no variable set.
func TestComposeVariablesHaveDefaults(t *testing.T) {
	var model map[string]any
	if err := yaml.Unmarshal(readCompose(t), &model); err != nil {
		t.Fatal(err)
	}
	for name, v := range template.ExtractVariables(model, nil) {
		if v.DefaultValue == "" {
			t.Errorf("variable %s has no default: write ${%s:-value}", name, name)
		}
	}
}

func checkServicesPresent(p *types.Project) []string {
	var problems []string
	for _, name := range []string{"nats", "redis", "azurite", "planner", "worker", "target", "jobs"} {
		if _, ok := p.Services[name]; !ok {
			problems = append(problems, "no service "+name)
		}
	}
	return problems
}

// checkBuildFiles: build contexts and Dockerfiles exist, and a SERVICE build argument names a
// main package under services/ (services/Dockerfile builds ./services/$SERVICE).
func checkBuildFiles(p *types.Project) []string {
	var problems []string
	for name, s := range p.Services {
		if s.Build == nil {
			continue
		}
		if fi, err := os.Stat(s.Build.Context); err != nil || !fi.IsDir() {
			problems = append(problems, fmt.Sprintf("%s: build context %s is not a directory", name, s.Build.Context))
			continue
		}
		dockerfile := s.Build.Dockerfile
		if !filepath.IsAbs(dockerfile) {
			dockerfile = filepath.Join(s.Build.Context, dockerfile)
		}
		if _, err := os.Stat(dockerfile); err != nil {
			problems = append(problems, fmt.Sprintf("%s: Dockerfile %s: %v", name, dockerfile, err))
		}
		if arg, ok := s.Build.Args["SERVICE"]; ok {
			if arg == nil || !isMainPackage(filepath.Join(s.Build.Context, "services", *arg)) {
				problems = append(problems, fmt.Sprintf("%s: build arg SERVICE does not name a main package under services/", name))
			}
		}
	}
	return problems
}

// exampleJobRE finds the example jobs the loader puts: "for j in a b c; do".
var exampleJobRE = regexp.MustCompile(`for j in ([a-z0-9 -]+); do`)

// checkExampleJobs: the one-shot "jobs" service loads example jobs that exist, from the
// examples directory it mounts, with their localhost URLs pointed at the target service and
// its port, and its NATS URL reaches the NATS service.
func checkExampleJobs(p *types.Project) []string {
	s, ok := p.Services["jobs"]
	if !ok {
		return nil // checkServicesPresent says so
	}
	var problems []string
	script := strings.Join(s.Command, " ")
	m := exampleJobRE.FindStringSubmatch(script)
	if m == nil {
		return []string{"jobs: no `for j in ...; do` list of example jobs in its command"}
	}
	mounted := false
	for _, v := range s.Volumes {
		if v.Target == "/examples" && filepath.Clean(v.Source) == filepath.Join(p.WorkingDir, "schemas", "examples") {
			mounted = true
		}
	}
	if !mounted {
		problems = append(problems, "jobs: schemas/examples is not mounted at /examples")
	}
	for _, name := range strings.Fields(m[1]) {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "schemas", "examples", name+".json"))
		if err != nil {
			problems = append(problems, fmt.Sprintf("jobs: example %s: %v", name, err))
			continue
		}
		if !strings.Contains(string(raw), "http://localhost:8080") {
			problems = append(problems, fmt.Sprintf("jobs: example %s has no http://localhost:8080 URL to point at the target", name))
		}
	}
	if !strings.Contains(script, "#http://target:8080#") || !slices.Contains(containerPorts(p.Services["target"]), 8080) {
		problems = append(problems, "jobs: the example URLs are not pointed at the target service's port 8080")
	}
	if v := s.Environment["NATS_URL"]; v == nil || checkServiceURL(p, *v, []string{"nats"}) != nil {
		problems = append(problems, "jobs: NATS_URL does not reach the nats service")
	}
	return problems
}

var packageMainRE = regexp.MustCompile(`(?m)^package main\s*$`)

func isMainPackage(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		if src, err := os.ReadFile(f); err == nil && packageMainRE.Match(src) {
			return true
		}
	}
	return false
}

// checkDependencies: every depends_on target exists, and one waited on until healthy has a
// health check.
func checkDependencies(p *types.Project) []string {
	var problems []string
	for name, s := range p.Services {
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s depends on %s, which is not a service", name, dep))
				continue
			}
			if d.Condition == types.ServiceConditionHealthy && !hasHealthCheck(target) {
				problems = append(problems, fmt.Sprintf("%s waits for %s to be healthy, but %s has no health check", name, dep, dep))
			}
		}
	}
	return problems
}

func hasHealthCheck(s types.ServiceConfig) bool {
	h := s.HealthCheck
	return h != nil && !h.Disable && len(h.Test) > 0 && h.Test[0] != "NONE"
}

// checkHostPorts: no two services publish the same host port. Host addresses are ignored:
// 0.0.0.0:8080 and 127.0.0.1:8080 collide too.
func checkHostPorts(p *types.Project) []string {
	var problems []string
	owner := map[string]string{}
	for _, name := range p.ServiceNames() {
		for _, port := range p.Services[name].Ports {
			if port.Published == "" {
				continue
			}
			from, to, err := portRange(port.Published)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: published port %q: %v", name, port.Published, err))
				continue
			}
			for n := from; n <= to; n++ {
				key := strconv.Itoa(n) + "/" + port.Protocol
				if other, taken := owner[key]; taken {
					problems = append(problems, fmt.Sprintf("host port %s is published by %s and %s", key, other, name))
				}
				owner[key] = name
			}
		}
	}
	return problems
}

func portRange(published string) (from, to int, err error) {
	lo, hi, isRange := strings.Cut(published, "-")
	if from, err = strconv.Atoi(lo); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return from, from, nil
	}
	to, err = strconv.Atoi(hi)
	return from, to, err
}

// checkScalable: a service started N times cannot have a fixed container name or host port.
func checkScalable(p *types.Project) []string {
	var problems []string
	for _, name := range scalableServices {
		s, ok := p.Services[name]
		if !ok {
			problems = append(problems, "no service "+name)
			continue
		}
		if s.ContainerName != "" {
			problems = append(problems, fmt.Sprintf("%s has container_name %q: --scale %s=N would fail", name, s.ContainerName, name))
		}
		for _, port := range s.Ports {
			if port.Published != "" {
				problems = append(problems, fmt.Sprintf("%s publishes host port %s: --scale %s=N would fail", name, port.Published, name))
			}
		}
	}
	return problems
}

// checkEnvironment: the services get only variables they read, and the required ones.
func checkEnvironment(p *types.Project) []string {
	var problems []string
	for name, vars := range knownEnv {
		s, ok := p.Services[name]
		if !ok {
			continue
		}
		for key := range s.Environment {
			if !vars.knows(key) {
				problems = append(problems, fmt.Sprintf("%s: %s is not a variable %s reads", name, key, name))
			}
		}
		for _, key := range vars.required {
			if v := s.Environment[key]; v == nil || strings.TrimSpace(*v) == "" {
				problems = append(problems, fmt.Sprintf("%s: %s is not set", name, key))
			}
		}
	}
	return problems
}

// serviceURLs are the variables that name another service, and their schemes.
var serviceURLs = map[string][]string{
	"NATS_URL":                              {"nats", "tls"},
	"REDIS_URL":                             {"redis", "rediss"},
	"RESCHED_WORKER_STORAGE_QUEUE_ENDPOINT": {"http", "https"},
}

// checkServiceURLs: the URLs of NATS, Redis and the Storage Queue emulator point at a service
// of the project, on a port that service listens on.
func checkServiceURLs(p *types.Project) []string {
	var problems []string
	for name, s := range p.Services {
		for key, schemes := range serviceURLs {
			v := s.Environment[key]
			if v == nil {
				continue
			}
			for _, raw := range strings.Split(*v, ",") {
				if err := checkServiceURL(p, strings.TrimSpace(raw), schemes); err != nil {
					problems = append(problems, fmt.Sprintf("%s: %s: %v", name, key, err))
				}
			}
		}
	}
	return problems
}

func checkServiceURL(p *types.Project, raw string, schemes []string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if !slices.Contains(schemes, u.Scheme) {
		return fmt.Errorf("scheme %q is not one of %v", u.Scheme, schemes)
	}
	target, ok := p.Services[u.Hostname()]
	if !ok {
		return fmt.Errorf("host %q is not a service", u.Hostname())
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("%q names no port", u.Redacted())
	}
	if !slices.Contains(containerPorts(target), port) {
		return fmt.Errorf("service %s does not declare port %d (ports or expose)", u.Hostname(), port)
	}
	return nil
}

// checkListenPorts: a service told to listen on a port declares that port.
func checkListenPorts(p *types.Project) []string {
	var problems []string
	for name, vars := range knownEnv {
		s, ok := p.Services[name]
		if !ok || vars.listen == "" || s.Environment[vars.listen] == nil {
			continue
		}
		addr := *s.Environment[vars.listen]
		_, portText, err := net.SplitHostPort(addr)
		port, convErr := strconv.Atoi(portText)
		if err != nil || convErr != nil {
			problems = append(problems, fmt.Sprintf("%s: %s=%q is not host:port", name, vars.listen, addr))
			continue
		}
		if !slices.Contains(containerPorts(s), port) {
			problems = append(problems, fmt.Sprintf("%s: listens on %d (%s) but declares no such port", name, port, vars.listen))
		}
	}
	return problems
}

// containerPorts are the ports a service declares inside its containers.
func containerPorts(s types.ServiceConfig) []int {
	var ports []int
	for _, p := range s.Ports {
		ports = append(ports, int(p.Target))
	}
	for _, e := range s.Expose {
		if n, err := strconv.Atoi(strings.TrimSuffix(e, "/tcp")); err == nil {
			ports = append(ports, n)
		}
	}
	return ports
}

// TestComposeChecksCatchMistakes runs each check on a small file with the mistake it exists to
// catch, so a check that passes everything cannot hide behind a correct docker-compose.yml.
func TestComposeChecksCatchMistakes(t *testing.T) {
	tests := []struct {
		name, check, yaml, want string
	}{
		{"worker with container_name", "scalable services",
			`services: {worker: {image: x, container_name: resched-worker}}`, "container_name"},
		{"worker with a fixed host port", "scalable services",
			`services: {worker: {image: x, ports: ["8082:8082"]}}`, "publishes host port 8082"},
		{"one host port twice", "host ports",
			`services: {a: {image: x, ports: ["8080:80"]}, b: {image: x, ports: ["127.0.0.1:8080:81"]}}`, "8080/tcp"},
		{"host port inside another's range", "host ports",
			`services: {a: {image: x, ports: ["8080-8083:80"]}, b: {image: x, ports: ["8082:81"]}}`, "8082/tcp"},
		{"waiting for health without a check", "dependencies",
			`services: {a: {image: x, depends_on: {b: {condition: service_healthy}}}, b: {image: x}}`, "no health check"},
		{"a variable the planner does not read", "environment",
			`services: {planner: {image: x, environment: {NATS_URL: "nats://n:4222", REDIS_URL: "redis://r:6379", RESCHED_PLANNER_LOGLEVEL: debug}}}`,
			"RESCHED_PLANNER_LOGLEVEL is not"},
		{"planner without REDIS_URL", "environment",
			`services: {planner: {image: x, environment: {NATS_URL: "nats://n:4222"}}}`, "REDIS_URL is not set"},
		{"URL naming no service", "service URLs",
			`services: {worker: {image: x, environment: {NATS_URL: "nats://natz:4222"}}}`, "not a service"},
		{"URL on a port the service does not declare", "service URLs",
			`services: {nats: {image: x, expose: ["4223"]}, worker: {image: x, environment: {NATS_URL: "nats://nats:4222"}}}`, "port 4222"},
		{"URL with the wrong scheme", "service URLs",
			`services: {redis: {image: x, expose: ["6379"]}, planner: {image: x, environment: {REDIS_URL: "http://redis:6379"}}}`, "scheme"},
		{"listen port not declared", "listen ports",
			`services: {planner: {image: x, environment: {RESCHED_PLANNER_HTTP_ADDR: ":9000"}, ports: ["8081"]}}`, "listens on 9000"},
		{"missing Dockerfile", "build files",
			`services: {a: {build: {context: ., dockerfile: services/Dockerfile.missing}}}`, "Dockerfile"},
		{"SERVICE naming no command", "build files",
			`services: {a: {build: {context: ., dockerfile: services/Dockerfile, args: {SERVICE: nope}}}}`, "main package"},
		{"worker logging in with the planner's password", "authentication",
			`{services: {nats: {image: x, command: ["export WORKER_PASSWORD=\"$$(cat /run/secrets/w)\" PLANNER_PASSWORD=\"$$(cat /run/secrets/p)\"; nats-server --config /etc/nats/nats.conf"], secrets: [w, p], volumes: ["./deploy/base/nats.conf:/etc/nats/nats.conf:ro"]},
			  worker: {image: x, environment: {NATS_USER: worker, NATS_PASSWORD_FILE: /run/secrets/p}, secrets: [p]}},
			 secrets: {w: {file: ./README.md}, p: {file: ./README.md}}}`, `user "worker" with secret "p"`},
		{"Redis without a password", "authentication",
			`services: {nats: {image: x}, redis: {image: x, command: ["redis-server"]}}`, "redis: no --requirepass"},
		{"a service missing", "services present",
			`services: {a: {image: x}}`, "no service nats"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadCompose(t, []byte(tt.yaml))
			problems := composeChecks[tt.check](p)
			if !slices.ContainsFunc(problems, func(s string) bool { return strings.Contains(s, tt.want) }) {
				t.Errorf("check %q reported %q, want a problem containing %q", tt.check, problems, tt.want)
			}
		})
	}
}

// TestComposeLoaderRefusesInconsistencies: the rules the compose-spec loader enforces itself,
// which the checks above therefore leave out.
func TestComposeLoaderRefusesInconsistencies(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"undeclared named volume", `services: {a: {image: x, volumes: ["data:/data"]}}`, "undefined volume data"},
		{"dependency on no service", `services: {a: {image: x, depends_on: [b]}}`, "b"},
		{"no image and no build", `services: {a: {command: ["true"]}}`, "image"},
		{"unknown attribute", `services: {a: {image: x, imagee: y}}`, "imagee"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := load([]byte(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("load = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
