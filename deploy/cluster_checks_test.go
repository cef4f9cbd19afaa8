package deploy

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// checkNATSCluster: a NATS StatefulSet of more than one server forms one JetStream cluster: each
// server routes to every pod of the set on its cluster port, the NetworkPolicies let the
// servers reach each other there, and the streams ask for no more replicas than there are
// servers. One server needs none of it.
func checkNATSCluster(m *manifests) []string {
	nats, ok := m.workload("StatefulSet", "nats")
	if !ok {
		return nil
	}
	var sts *appsv1.StatefulSet
	for _, s := range ofType[*appsv1.StatefulSet](m) {
		if s.Name == "nats" {
			sts = s
		}
	}
	servers := 1
	if sts.Spec.Replicas != nil {
		servers = int(*sts.Spec.Replicas)
	}
	var problems []string
	for program, containers := range m.serviceContainers() {
		if knownEnv[program].prefix == "" {
			continue
		}
		for _, c := range containers {
			if v, ok := m.envValue(c, knownEnv[program].prefix+"STREAM_REPLICAS"); ok {
				if n, _ := strconv.Atoi(v); n > servers {
					problems = append(problems, fmt.Sprintf("%s: %d stream replicas on %d NATS servers", program, n, servers))
				}
			}
		}
	}
	if servers == 1 {
		return problems
	}
	c, _ := nats.container("nats")
	listen, ok := flagValue(c.Args, "--cluster")
	if !ok {
		return append(problems, fmt.Sprintf("%d NATS servers without --cluster: each is alone", servers))
	}
	u, err := url.Parse(listen)
	if err != nil {
		return append(problems, fmt.Sprintf("--cluster %q is not a URL", listen))
	}
	port := u.Port()
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return strconv.Itoa(int(p.ContainerPort)) == port })
	if i < 0 {
		return append(problems, "the NATS container declares no port "+port+" for its routes")
	}
	routes, _ := flagValue(c.Args, "--routes")
	for n := range servers {
		want := fmt.Sprintf("nats://nats-%d.%s:%s", n, sts.Spec.ServiceName, port)
		if !slices.Contains(strings.Split(routes, ","), want) {
			problems = append(problems, fmt.Sprintf("--routes does not name %s: that server stays out of the cluster", want))
		}
	}
	if !m.admits(nats, nats, c.Ports[i].Name) {
		problems = append(problems, "the NetworkPolicies keep the NATS servers from reaching each other's port "+c.Ports[i].Name)
	}
	for _, w := range m.workloads() {
		if w.name != "nats" && m.admits(w, nats, c.Ports[i].Name) {
			problems = append(problems, fmt.Sprintf("%s can reach the NATS route port", w.name))
		}
	}
	return problems
}

// checkNATSLameDuck: a NATS server of a cluster told to stop hands its leaderships and clients
// to the others first. Its preStop puts it in lame duck mode through the process id file it
// writes (--pid, on a writable volume: the root file system is read-only), and its lame duck
// duration and grace period (nats.conf) end before the pod's termination grace period does,
// or the kubelet kills it half way. One server has no other to hand over to.
func checkNATSLameDuck(m *manifests) []string {
	nats, ok := m.workload("StatefulSet", "nats")
	if !ok || nats.replicas == nil || *nats.replicas < 2 {
		return nil
	}
	c, _ := nats.container("nats")
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil {
		return []string{"the NATS servers have no preStop: a stopped server leaves its leaderships to an election"}
	}
	cmd := strings.Join(c.Lifecycle.PreStop.Exec.Command, " ")
	signal := lameDuckSignal.FindStringSubmatch(cmd)
	if signal == nil {
		return []string{fmt.Sprintf("the NATS preStop %q does not signal lame duck mode (nats-server --signal ldm=<pid file>)", cmd)}
	}
	pidFile := signal[1]
	var problems []string
	if !strings.Contains(cmd, "kill -0") {
		problems = append(problems, "the NATS preStop returns once it has signalled: the kubelet's SIGTERM may reach the server before lame duck mode, and stop it at once; wait for the server to exit (kill -0)")
	}
	if written, _ := flagValue(c.Args, "--pid", "-P"); written != pidFile {
		problems = append(problems, fmt.Sprintf("the NATS preStop reads %s, the server writes its process id to %q", pidFile, written))
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.MountPath == path.Dir(pidFile) && !v.ReadOnly }) {
		problems = append(problems, "no writable volume is mounted at "+path.Dir(pidFile)+" for the NATS process id file")
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if s := nats.pod.Spec.TerminationGracePeriodSeconds; s != nil {
		grace = *s
	}
	d := lameDuck(m, nats)
	if d < 30*time.Second {
		problems = append(problems, fmt.Sprintf("the NATS lame_duck_duration is %v: nats-server refuses less than 30s", d))
	}
	// Plus a second of leadership hand-over before the duration starts.
	if d+time.Second >= time.Duration(grace)*time.Second {
		problems = append(problems, fmt.Sprintf("the NATS lame duck mode lasts %v, the pods are killed %ds after their preStop starts", d+time.Second, grace))
	}
	return problems
}

// lameDuck is the lame_duck_duration of the nats.conf the NATS pods mount (nats-server's
// default where unset).
func lameDuck(m *manifests, nats workload) time.Duration {
	d := 2 * time.Minute
	for _, v := range nats.pod.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		if cm := m.configMap(v.ConfigMap.Name); cm != nil {
			if conf := lameDuckDuration.FindStringSubmatch(cm.Data["nats.conf"]); conf != nil {
				if parsed, err := time.ParseDuration(conf[1]); err == nil {
					d = parsed
				}
			}
		}
	}
	return d
}

var lameDuckSignal = regexp.MustCompile(`nats-server (?:--signal|-sl)[= ]ldm=(\S+)`)

var lameDuckDuration = regexp.MustCompile(`(?m)^\s*lame_duck_duration\s*[:=]\s*"?([0-9a-z.]+)"?`)
