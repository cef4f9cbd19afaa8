package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// exportFromSecret is a shell line of a compose command that reads a secret into a variable:
// export NAME="$(cat /run/secrets/secret)" (the $$ of the file is $ once loaded).
var exportFromSecret = regexp.MustCompile(`(\w+)="\$\(cat /run/secrets/([\w-]+)\)"`)

// secretOf is the compose secret a /run/secrets path names, when the service mounts it.
func secretOf(s types.ServiceConfig, path string) (string, bool) {
	name, ok := strings.CutPrefix(path, "/run/secrets/")
	if !ok {
		return "", false
	}
	return name, slices.ContainsFunc(s.Secrets, func(r types.ServiceSecretConfig) bool { return r.Source == name })
}

// checkComposeAuthentication: NATS runs with deploy/base/nats.conf and reads its users'
// passwords from compose secrets; the planner, the worker and the loader log in as users of it
// with the same secrets; Redis requires the password the planner reads; the planner and the
// worker read the same secret keys.
func checkComposeAuthentication(p *types.Project) []string {
	return slices.Concat(composeNATSUsers(p), composeRedisPassword(p), composeSecretKeys(p))
}

// composeNATSUsers: the services log in as users of deploy/base/nats.conf with the secrets the
// nats service reads those users' passwords from.
func composeNATSUsers(p *types.Project) []string {
	var problems []string
	nats, ok := p.Services["nats"]
	if !ok {
		return nil // checkServicesPresent says so
	}
	conf := ""
	for _, v := range nats.Volumes {
		if v.Target == "/etc/nats/nats.conf" && filepath.Clean(v.Source) == filepath.Join(p.WorkingDir, "deploy", "base", "nats.conf") {
			b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "base", "nats.conf"))
			if err == nil {
				conf = string(b)
			}
		}
	}
	script := strings.Join(nats.Command, " ")
	if conf == "" || !strings.Contains(script, "--config /etc/nats/nats.conf") {
		return []string{"nats: not run with deploy/base/nats.conf mounted at /etc/nats/nats.conf"}
	}
	exported := map[string]string{} // variable → secret, as the nats command sets them
	for _, m := range exportFromSecret.FindAllStringSubmatch(script, -1) {
		if _, mounted := secretOf(nats, "/run/secrets/"+m[2]); mounted {
			exported[m[1]] = m[2]
		}
	}
	users := map[string]string{} // user → secret holding its password
	for _, m := range natsUserLine.FindAllStringSubmatch(conf, -1) {
		users[m[1]] = exported[m[2]]
	}
	for _, name := range []string{"planner", "worker", "jobs", "gateway"} {
		s, ok := p.Services[name]
		if !ok {
			continue
		}
		user := deref(s.Environment["NATS_USER"])
		secret, mounted := secretOf(s, deref(s.Environment["NATS_PASSWORD_FILE"]))
		if name == "jobs" {
			for _, m := range exportFromSecret.FindAllStringSubmatch(strings.Join(s.Command, " "), -1) {
				if m[1] == "NATS_PASSWORD" {
					secret, mounted = secretOf(s, "/run/secrets/"+m[2])
				}
			}
		}
		if want, known := users[user]; !known || want == "" || !mounted || secret != want {
			problems = append(problems, fmt.Sprintf("%s: logs in as NATS user %q with secret %q, not the one nats.conf gives that user", name, user, secret))
		}
	}
	return problems
}

// composeRedisPassword: Redis requires the password the planner reads.
func composeRedisPassword(p *types.Project) []string {
	var problems []string
	redisSecret := ""
	if r, ok := p.Services["redis"]; ok {
		m := regexp.MustCompile(`--requirepass "\$\(cat /run/secrets/([\w-]+)\)"`).FindStringSubmatch(strings.Join(r.Command, " "))
		if m == nil {
			problems = append(problems, "redis: no --requirepass from a secret")
		} else if _, mounted := secretOf(r, "/run/secrets/"+m[1]); mounted {
			redisSecret = m[1]
		}
	}
	if s, ok := p.Services["planner"]; ok {
		if secret, mounted := secretOf(s, deref(s.Environment["REDIS_PASSWORD_FILE"])); !mounted || secret != redisSecret || redisSecret == "" {
			problems = append(problems, "planner: REDIS_PASSWORD_FILE is not the secret Redis requires")
		}
	}
	return problems
}

// composeSecretKeys: the planner and the worker read the same secret keys.
func composeSecretKeys(p *types.Project) []string {
	var problems []string
	keys := map[string]string{}
	for _, name := range []string{"planner", "worker"} {
		if s, ok := p.Services[name]; ok {
			secret, mounted := secretOf(s, deref(s.Environment["RESCHED_SECRET_KEYS_FILE"]))
			if !mounted {
				problems = append(problems, name+": RESCHED_SECRET_KEYS_FILE is not a secret it mounts")
			}
			keys[name] = secret
		}
	}
	if keys["planner"] != keys["worker"] {
		problems = append(problems, fmt.Sprintf("the planner and the worker read different secret keys: %q and %q", keys["planner"], keys["worker"]))
	}
	return problems
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
