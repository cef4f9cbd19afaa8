package deploy

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// natsUserLine is a user of nats.conf whose password comes from the environment:
// {user: planner, password: $PLANNER_PASSWORD, ...}.
var natsUserLine = regexp.MustCompile(`\{\s*user:\s*"?([\w-]+)"?\s*,\s*password:\s*\$(\w+)`)

// checkAuthentication: NATS and Redis ask every client for credentials; the planner and the
// worker log in with the passwords the servers give their users, read from a Secret; both read
// the same secret keys, from a mounted Secret.
func checkAuthentication(m *manifests) []string {
	var problems []string
	nats, ok := m.workload("StatefulSet", "nats")
	if !ok {
		return []string{"no StatefulSet nats"}
	}
	server, _ := nats.container("nats")
	conf, err := m.mountedFile(nats, server, flagOf(server.Args, "--config", "-c"))
	if err != nil {
		return []string{"NATS runs without a configuration that requires authentication: " + err.Error()}
	}
	if !strings.Contains(conf, "authorization") || strings.Contains(conf, "no_auth_user") {
		problems = append(problems, "NATS's configuration lets clients in without credentials")
	}
	users := map[string]string{} // user → the variable holding its password
	for _, match := range natsUserLine.FindAllStringSubmatch(conf, -1) {
		users[match[1]] = match[2]
	}
	redisPassword := ""
	if redis, ok := m.workload("StatefulSet", "redis"); ok {
		c, _ := redis.container("redis")
		if v, ok := flagValue(c.Args, "--requirepass"); !ok || v != "$(REDIS_PASSWORD)" {
			problems = append(problems, "Redis runs without --requirepass $(REDIS_PASSWORD)")
		}
		redisPassword, _ = m.envValue(c, "REDIS_PASSWORD")
	}
	keys := map[string]string{}
	for program, containers := range m.serviceContainers() {
		if knownEnv[program].prefix == "" {
			continue
		}
		for _, c := range containers {
			user, _ := m.envValue(c, "NATS_USER")
			variable, known := users[user]
			want, _ := m.envValue(server, variable)
			if got, _ := m.envValue(c, "NATS_PASSWORD"); !known || got != want || !m.fromSecret(c, "NATS_PASSWORD") {
				problems = append(problems, fmt.Sprintf("%s: NATS_PASSWORD is not, from a Secret, the password nats.conf gives user %q", program, user))
			}
			if program == "planner" {
				if got, _ := m.envValue(c, "REDIS_PASSWORD"); (got != redisPassword && !m.externalRedis()) || !m.fromSecret(c, "REDIS_PASSWORD") {
					problems = append(problems, "planner: REDIS_PASSWORD is not, from a Secret, the password Redis requires")
				}
			}
			// Files of secrets: the keys that seal job secrets, the gateway's access file.
			for _, v := range []string{"RESCHED_SECRET_KEYS_FILE", knownEnv[program].prefix + "ACCESS_FILE"} {
				if !knownEnv[program].knows(v) {
					continue
				}
				file, _ := m.envValue(c, v)
				source, err := secretFile(c, m.podOf(program), file)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: %s %q: %v", program, v, file, err))
				}
				if v == "RESCHED_SECRET_KEYS_FILE" {
					keys[program] = source
				}
			}
		}
	}
	if keys["planner"] != keys["worker"] {
		problems = append(problems, fmt.Sprintf("the planner and the worker read different secret keys: %q and %q", keys["planner"], keys["worker"]))
	}
	return problems
}

func flagOf(args []string, names ...string) string {
	v, _ := flagValue(args, names...)
	return v
}

// fromSecret reports whether the container's variable comes from a Secret's key: set from
// it, or given as X_FILE, a file of a mounted Secret.
func (m *manifests) fromSecret(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
		}
	}
	file, ok := m.envSet(c, name+"_FILE")
	if !ok {
		return false
	}
	_, err := secretFile(c, m.podOf(c.Name), file)
	return err == nil
}

// podOf is the pod template of a program's workload.
func (m *manifests) podOf(program string) corev1.PodSpec {
	for _, w := range m.workloads() {
		if _, ok := w.container(program); ok {
			return w.pod.Spec
		}
	}
	return corev1.PodSpec{}
}

// mountedFile is the content of a file the container reads from a mounted ConfigMap.
func (m *manifests) mountedFile(w workload, c corev1.Container, file string) (string, error) {
	if file == "" {
		return "", fmt.Errorf("no --config")
	}
	for _, mount := range c.VolumeMounts {
		if path.Dir(file) != mount.MountPath {
			continue
		}
		for _, v := range w.pod.Spec.Volumes {
			if v.Name == mount.Name && v.ConfigMap != nil {
				if cm := m.configMap(v.ConfigMap.Name); cm != nil {
					if content, ok := cm.Data[path.Base(file)]; ok {
						return content, nil
					}
				}
			}
		}
	}
	return "", fmt.Errorf("%s is not in a mounted ConfigMap", file)
}

// secretFile is "secret/key" of the Secret key a file of the pod comes from.
func secretFile(c corev1.Container, pod corev1.PodSpec, file string) (string, error) {
	for _, mount := range c.VolumeMounts {
		if path.Dir(file) != mount.MountPath {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != mount.Name || v.Secret == nil {
				continue
			}
			for _, item := range v.Secret.Items {
				if item.Path == path.Base(file) {
					return v.Secret.SecretName + "/" + item.Key, nil
				}
			}
		}
	}
	return "", fmt.Errorf("not in a mounted Secret")
}

// checkNetworkPolicies: ingress is denied by default; only the planners reach Redis; the
// planners and the workers reach NATS's client port.
func checkNetworkPolicies(m *manifests) []string {
	var problems []string
	if !slices.ContainsFunc(ofType[*networkingv1.NetworkPolicy](m), func(np *networkingv1.NetworkPolicy) bool {
		return len(np.Spec.PodSelector.MatchLabels) == 0 && len(np.Spec.PodSelector.MatchExpressions) == 0 &&
			slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) && len(np.Spec.Ingress) == 0
	}) {
		problems = append(problems, "no NetworkPolicy denies ingress by default")
	}
	redis, _ := m.workload("StatefulSet", "redis")
	nats, _ := m.workload("StatefulSet", "nats")
	for _, src := range m.workloads() {
		if m.externalRedis() {
			// The operator's Redis: its own network rules apply.
		} else if admits := m.admits(src, redis, "redis"); admits != (src.name == "planner") {
			problems = append(problems, fmt.Sprintf("%s can reach Redis: %v (only the planners may)", src.name, admits))
		}
		if (src.name == "planner" || src.name == "worker") && !m.admits(src, nats, "client") {
			problems = append(problems, src.name+" cannot reach NATS")
		}
	}
	return problems
}

// admits reports whether the NetworkPolicies let the pods of src (in the install's namespace)
// reach the named port of dst's pods.
func (m *manifests) admits(src, dst workload, port string) bool {
	namespace := ""
	if ns := m.ofKind("Namespace"); len(ns) == 1 {
		namespace = ns[0].GetName()
	}
	selected := false
	for _, np := range ofType[*networkingv1.NetworkPolicy](m) {
		if !matches(&np.Spec.PodSelector, dst.pod.Labels) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		selected = true
		for _, rule := range np.Spec.Ingress {
			if !portMatches(rule.Ports, dst, port) {
				continue
			}
			if len(rule.From) == 0 {
				return true
			}
			for _, peer := range rule.From {
				sameNamespace := peer.NamespaceSelector == nil ||
					matches(peer.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": namespace})
				if peer.IPBlock == nil && sameNamespace && (peer.PodSelector == nil || matches(peer.PodSelector, src.pod.Labels)) {
					return true
				}
			}
		}
	}
	return !selected // a pod no policy selects is open
}

// matches is a NetworkPolicy selector's meaning: empty selects everything.
func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

func portMatches(ports []networkingv1.NetworkPolicyPort, dst workload, name string) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil {
			return true
		}
		for _, c := range dst.pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == name && (p.Port.StrVal == name || p.Port.IntVal == cp.ContainerPort) {
					return true
				}
			}
		}
	}
	return false
}
