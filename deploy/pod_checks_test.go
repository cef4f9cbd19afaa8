package deploy

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkStorage: NATS and Redis keep their data on PersistentVolumes, where they are told to
// write it, and Redis writes an append-only file.
func checkStorage(m *manifests) []string {
	var problems []string
	dataDir := map[string][]string{"nats": {"--store_dir", "-sd"}, "redis": {"--dir"}}
	for name, flags := range dataDir {
		var sts *appsv1.StatefulSet
		for _, s := range ofType[*appsv1.StatefulSet](m) {
			if s.Name == name {
				sts = s
			}
		}
		if sts == nil && name == "redis" && m.externalRedis() {
			continue // the operator's Redis: its storage is theirs
		}
		if sts == nil {
			problems = append(problems, "no StatefulSet "+name)
			continue
		}
		if len(sts.Spec.VolumeClaimTemplates) == 0 {
			problems = append(problems, fmt.Sprintf("StatefulSet/%s has no volumeClaimTemplates", name))
			continue
		}
		c, ok := workload{pod: sts.Spec.Template}.container(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("StatefulSet/%s has no container %s", name, name))
			continue
		}
		claim := sts.Spec.VolumeClaimTemplates[0]
		if claim.Spec.Resources.Requests.Storage().IsZero() {
			problems = append(problems, fmt.Sprintf("StatefulSet/%s: claim %s requests no storage", name, claim.Name))
		}
		i := slices.IndexFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.Name == claim.Name })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("StatefulSet/%s: claim %s is not mounted", name, claim.Name))
			continue
		}
		if dir, _ := flagValue(c.Args, flags...); dir != c.VolumeMounts[i].MountPath {
			problems = append(problems, fmt.Sprintf("StatefulSet/%s writes to %q, but the claim is mounted at %s", name, dir, c.VolumeMounts[i].MountPath))
		}
		if name == "redis" {
			if v, _ := flagValue(c.Args, "--appendonly"); v != "yes" {
				problems = append(problems, "Redis runs without --appendonly yes: a restart loses the jobs")
			}
		}
	}
	return problems
}

// checkSecurity: every container meets the restricted Pod Security Standard the Namespace
// enforces, and has a read-only root file system.
func checkSecurity(m *manifests) []string {
	var problems []string
	for _, w := range m.workloads() {
		pod := w.pod.Spec.SecurityContext
		if pod == nil {
			pod = &corev1.PodSecurityContext{}
		}
		for _, c := range slices.Concat(w.pod.Spec.InitContainers, w.pod.Spec.Containers) {
			sc := c.SecurityContext
			if sc == nil {
				sc = &corev1.SecurityContext{}
			}
			where := fmt.Sprintf("%s container %s", w, c.Name)
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				problems = append(problems, where+": allowPrivilegeEscalation is not false")
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				problems = append(problems, where+": capabilities do not drop ALL")
			}
			if !isTrue(sc.RunAsNonRoot) && !isTrue(pod.RunAsNonRoot) {
				problems = append(problems, where+": runAsNonRoot is not set")
			}
			if !isRuntimeDefault(sc.SeccompProfile) && !isRuntimeDefault(pod.SeccompProfile) {
				problems = append(problems, where+": no RuntimeDefault seccomp profile")
			}
			if !isTrue(sc.ReadOnlyRootFilesystem) {
				problems = append(problems, where+": the root file system is writable")
			}
		}
	}
	return problems
}

func isTrue(b *bool) bool { return b != nil && *b }

func isRuntimeDefault(p *corev1.SeccompProfile) bool {
	return p != nil && p.Type == corev1.SeccompProfileTypeRuntimeDefault
}

// checkImageTags: every image names a tag other than latest, or a digest, so what runs is
// what was tested and a restart does not silently upgrade.
func checkImageTags(m *manifests) []string {
	var problems []string
	for _, w := range m.workloads() {
		for _, c := range slices.Concat(w.pod.Spec.InitContainers, w.pod.Spec.Containers) {
			name := c.Image[strings.LastIndexByte(c.Image, '/')+1:]
			_, tag, tagged := strings.Cut(name, ":")
			if !strings.Contains(c.Image, "@sha256:") && (!tagged || tag == "latest") {
				problems = append(problems, fmt.Sprintf("%s container %s: image %q has no fixed tag", w, c.Name, c.Image))
			}
		}
	}
	return problems
}

// checkConnectionURLs: NATS_URL and REDIS_URL point at a Service and port of the install, and
// the Redis password in REDIS_URL is the one the Redis server is given.
func checkConnectionURLs(m *manifests) []string {
	var problems []string
	for program, containers := range m.serviceContainers() {
		for _, c := range containers {
			for key, schemes := range serviceURLs {
				v, ok := m.envValue(c, key)
				if !ok {
					continue
				}
				if key == "REDIS_URL" && m.externalRedis() {
					if err := checkExternalRedisURL(v); err != nil {
						problems = append(problems, fmt.Sprintf("%s: %s: %v", program, key, err))
					}
					continue
				}
				for _, raw := range strings.Split(v, ",") {
					if err := m.checkURL(strings.TrimSpace(raw), schemes); err != nil {
						problems = append(problems, fmt.Sprintf("%s: %s: %v", program, key, err))
					}
				}
			}
		}
	}
	return problems
}

func (m *manifests) checkURL(raw string, schemes []string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL")
	}
	if !slices.Contains(schemes, u.Scheme) {
		return fmt.Errorf("scheme %q is not one of %v", u.Scheme, schemes)
	}
	namespace := ""
	if ns := m.ofKind("Namespace"); len(ns) == 1 {
		namespace = ns[0].GetName()
	}
	if err := m.checkClusterAddress(u.Host, namespace, false); err != nil {
		return err
	}
	password, hasPassword := u.User.Password()
	if !hasPassword {
		return nil
	}
	// The server behind the Service: its REDIS_PASSWORD must be the URL's password.
	service := m.service(strings.Split(u.Hostname(), ".")[0])
	for _, w := range m.workloads() {
		if !w.selectedBy(&metav1.LabelSelector{MatchLabels: service.Spec.Selector}) {
			continue
		}
		for _, c := range w.pod.Spec.Containers {
			if v, ok := m.envValue(c, "REDIS_PASSWORD"); ok && v != password {
				return fmt.Errorf("the password differs from the REDIS_PASSWORD of %s", w)
			}
		}
	}
	return nil
}

// externalRedis: the install runs no Redis of its own; the planners use the operator's (a Redis
// Cluster, Sentinel, a managed service).
func (m *manifests) externalRedis() bool {
	_, ok := m.workload("StatefulSet", "redis")
	return !ok
}

// redisSchemes are REDIS_URL's topologies (docs/operations.md, Redis).
var redisSchemes = []string{"redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"}

// checkExternalRedisURL: a Redis outside the install is named by a URL of a known topology, with
// at least one host:port, and no password in it: the password comes from REDIS_PASSWORD (a
// Secret), so the URL can be shown.
func checkExternalRedisURL(raw string) error {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !slices.Contains(redisSchemes, scheme) {
		return fmt.Errorf("scheme %q is not one of %v", scheme, redisSchemes)
	}
	authority, _, _ := strings.Cut(rest, "/")
	if strings.Contains(authority, "@") {
		return fmt.Errorf("the URL holds credentials: set REDIS_PASSWORD from a Secret instead")
	}
	for _, hp := range strings.Split(authority, ",") {
		if host, port, err := net.SplitHostPort(hp); err != nil || host == "" || port == "" {
			return fmt.Errorf("%q is not host:port", hp)
		}
	}
	return nil
}

// sharedSettings are settings the planner and the worker must agree on, with their default:
// the subjects they talk on, and the replicas of the streams either may create.
var sharedSettings = map[string]string{
	"SUBJECT_PREFIX":  defaultSubjectPrefix,
	"STREAM_REPLICAS": "1",
}

// checkSharedSettings: the planner and the worker agree on sharedSettings.
func checkSharedSettings(m *manifests) []string {
	var problems []string
	for suffix, def := range sharedSettings {
		values := map[string]bool{}
		for program, containers := range m.serviceContainers() {
			if knownEnv[program].prefix == "" {
				continue // not a scheduler service
			}
			if !knownEnv[program].knows(knownEnv[program].prefix + suffix) {
				continue // the setting is not one of this program's
			}
			for _, c := range containers {
				v, ok := m.envValue(c, knownEnv[program].prefix+suffix)
				if !ok {
					v = def
				}
				values[v] = true
			}
		}
		if len(values) > 1 {
			problems = append(problems, fmt.Sprintf("the planner and the worker use different %s: %v", suffix, values))
		}
	}
	return problems
}
