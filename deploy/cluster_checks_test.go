package deploy

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

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
