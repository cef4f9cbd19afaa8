package deploy

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// busContract is what the manifests must agree with in services/internal/bus: the workers'
// durable consumer and how the due stream is named.
type busContract struct {
	workerConsumer string
	dueKind        string // the stream is <PREFIX>_<dueKind>
}

// dueStream mirrors bus.streamName: the subject prefix upper-cased, dots and wildcards made
// underscores.
func (b busContract) dueStream(prefix string) string {
	r := strings.NewReplacer(".", "_", "*", "_", ">", "_", " ", "_")
	return r.Replace(strings.ToUpper(prefix)) + "_" + b.dueKind
}

// defaultSubjectPrefix is the planner's and the worker's default RESCHED_*_SUBJECT_PREFIX.
const defaultSubjectPrefix = "scheduler"

// manifestCheck inspects a build and returns what is wrong with it.
type manifestCheck func(m *manifests) []string

// manifestChecks are every check TestManifests runs on each build, by name.
func manifestChecks(bus busContract) map[string]manifestCheck {
	return map[string]manifestCheck{
		"namespace":                    checkNamespace,
		"workload selectors":           checkWorkloadSelectors,
		"services":                     checkServices,
		"disruption budgets":           checkDisruptionBudgets,
		"config and secret references": checkEnvRefs,
		"service environment":          checkServiceEnv,
		"probes":                       checkProbes,
		"planner replicas":             checkPlannerReplicas,
		"autoscaling":                  checkAutoscaling,
		"KEDA triggers":                func(m *manifests) []string { return checkScaledObjects(m, bus) },
		"persistent storage":           checkStorage,
		"security context":             checkSecurity,
		"image tags":                   checkImageTags,
		"connection URLs":              checkConnectionURLs,
		"shared settings":              checkSharedSettings,
		"authentication":               checkAuthentication,
		"network policies":             checkNetworkPolicies,
		"NATS cluster":                 checkNATSCluster,
		"NATS lame duck":               checkNATSLameDuck,
	}
}

// checkNamespace: one Namespace, and every other object in it.
func checkNamespace(m *manifests) []string {
	namespaces := m.ofKind("Namespace")
	if len(namespaces) != 1 {
		return []string{fmt.Sprintf("%d Namespace objects, want 1", len(namespaces))}
	}
	want := namespaces[0].GetName()
	var problems []string
	for _, o := range m.objects {
		if o.gvk.Kind != "Namespace" && o.u.GetNamespace() != want {
			problems = append(problems, fmt.Sprintf("%s is in namespace %q, not %q", o, o.u.GetNamespace(), want))
		}
	}
	return problems
}

func checkWorkloadSelectors(m *manifests) []string {
	var problems []string
	for _, w := range m.workloads() {
		if !w.selectedBy(w.selector) {
			problems = append(problems, fmt.Sprintf("%s: selector %v does not match its pod labels %v", w, w.selector, w.pod.Labels))
		}
	}
	return problems
}

// checkServices: every Service selects pods, and their containers declare its target ports.
func checkServices(m *manifests) []string {
	var problems []string
	for _, s := range ofType[*corev1.Service](m) {
		var selected []workload
		for _, w := range m.workloads() {
			if len(s.Spec.Selector) > 0 && w.selectedBy(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}) {
				selected = append(selected, w)
			}
		}
		if len(selected) == 0 {
			problems = append(problems, fmt.Sprintf("Service/%s selects no pods", s.Name))
		}
		for _, w := range selected {
			for _, p := range s.Spec.Ports {
				target := p.TargetPort
				if target.Type == intstr.Int && target.IntVal == 0 {
					target = intstr.FromInt32(p.Port)
				}
				if w.containerPort(target) == 0 {
					problems = append(problems, fmt.Sprintf("Service/%s port %s: %s declares no container port %s", s.Name, p.Name, w, target.String()))
				}
			}
		}
	}
	return problems
}

func checkDisruptionBudgets(m *manifests) []string {
	var problems []string
	for _, pdb := range ofType[*policyv1.PodDisruptionBudget](m) {
		n := 0
		for _, w := range m.workloads() {
			if w.selectedBy(pdb.Spec.Selector) {
				n++
			}
		}
		if n != 1 {
			problems = append(problems, fmt.Sprintf("PodDisruptionBudget/%s selects the pods of %d workloads, want 1", pdb.Name, n))
		}
	}
	for _, name := range []string{"planner", "worker"} {
		if !slices.ContainsFunc(ofType[*policyv1.PodDisruptionBudget](m), func(p *policyv1.PodDisruptionBudget) bool {
			w, ok := m.workload("Deployment", name)
			return ok && w.selectedBy(p.Spec.Selector)
		}) {
			problems = append(problems, "no PodDisruptionBudget for the "+name)
		}
	}
	return problems
}

// checkEnvRefs: every ConfigMap and Secret a container reads exists, with the key it reads.
func checkEnvRefs(m *manifests) []string {
	var problems []string
	for _, w := range m.workloads() {
		for _, c := range slices.Concat(w.pod.Spec.InitContainers, w.pod.Spec.Containers) {
			where := fmt.Sprintf("%s container %s", w, c.Name)
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil && !isOptional(ref.Optional) {
					if cm := m.configMap(ref.Name); cm == nil {
						problems = append(problems, fmt.Sprintf("%s: %s reads ConfigMap %s, which does not exist", where, e.Name, ref.Name))
					} else if _, ok := cm.Data[ref.Key]; !ok {
						problems = append(problems, fmt.Sprintf("%s: %s reads key %s, which ConfigMap %s lacks", where, e.Name, ref.Key, ref.Name))
					}
				}
				if ref := e.ValueFrom.SecretKeyRef; ref != nil && !isOptional(ref.Optional) {
					if s := m.secret(ref.Name); s == nil {
						problems = append(problems, fmt.Sprintf("%s: %s reads Secret %s, which does not exist", where, e.Name, ref.Name))
					} else if _, ok := secretValue(s, ref.Key); !ok {
						problems = append(problems, fmt.Sprintf("%s: %s reads key %s, which Secret %s lacks", where, e.Name, ref.Key, ref.Name))
					}
				}
			}
			for _, from := range c.EnvFrom {
				if ref := from.ConfigMapRef; ref != nil && !isOptional(ref.Optional) && m.configMap(ref.Name) == nil {
					problems = append(problems, fmt.Sprintf("%s: envFrom ConfigMap %s does not exist", where, ref.Name))
				}
				if ref := from.SecretRef; ref != nil && !isOptional(ref.Optional) && m.secret(ref.Name) == nil {
					problems = append(problems, fmt.Sprintf("%s: envFrom Secret %s does not exist", where, ref.Name))
				}
			}
		}
	}
	return problems
}

func isOptional(b *bool) bool { return b != nil && *b }

// serviceContainers are the containers running one of our programs, by program name.
func (m *manifests) serviceContainers() map[string][]corev1.Container {
	out := map[string][]corev1.Container{}
	for _, w := range m.workloads() {
		for _, c := range w.pod.Spec.Containers {
			if _, ok := knownEnv[c.Name]; ok {
				out[c.Name] = append(out[c.Name], c)
			}
		}
	}
	return out
}

// checkServiceEnv: our programs get only variables they read, and the required ones.
func checkServiceEnv(m *manifests) []string {
	var problems []string
	all := m.serviceContainers()
	for _, program := range []string{"planner", "worker"} {
		if len(all[program]) == 0 {
			problems = append(problems, "no container named "+program)
		}
	}
	for program, containers := range all {
		vars := knownEnv[program]
		for _, c := range containers {
			for _, name := range m.envNames(c) {
				if !vars.knows(name) {
					problems = append(problems, fmt.Sprintf("%s: %s is not a variable %s reads", program, name, program))
				}
			}
			for _, name := range vars.required {
				if v, ok := m.envValue(c, name); !ok || strings.TrimSpace(v) == "" {
					problems = append(problems, fmt.Sprintf("%s: %s is not set", program, name))
				}
			}
		}
	}
	return problems
}

// checkProbes: the planner and the worker are probed on /healthz (liveness) and /readyz
// (readiness), on the port they are told to listen on.
func checkProbes(m *manifests) []string {
	var problems []string
	for _, w := range m.workloads() {
		for _, c := range w.pod.Spec.Containers {
			vars, ok := knownEnv[c.Name]
			if !ok {
				continue
			}
			port := vars.port
			if v, set := m.envValue(c, vars.listen); vars.listen != "" && set {
				if port, ok = listenPort(v); !ok {
					problems = append(problems, fmt.Sprintf("%s: %s=%q has no port", w, vars.listen, v))
					continue
				}
			}
			for _, p := range []struct {
				kind, path string
				probe      *corev1.Probe
			}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
				switch {
				case p.probe == nil || p.probe.HTTPGet == nil:
					problems = append(problems, fmt.Sprintf("%s: no HTTP %s probe", w, p.kind))
				case p.probe.HTTPGet.Path != p.path:
					problems = append(problems, fmt.Sprintf("%s: %s probe on %s, want %s", w, p.kind, p.probe.HTTPGet.Path, p.path))
				case portOf(c, p.probe.HTTPGet.Port) != port:
					problems = append(problems, fmt.Sprintf("%s: %s probe on port %s, but %s listens on %d", w, p.kind, p.probe.HTTPGet.Port.String(), c.Name, port))
				}
			}
		}
	}
	return problems
}

func checkPlannerReplicas(m *manifests) []string {
	w, ok := m.workload("Deployment", "planner")
	if !ok {
		return []string{"no planner Deployment"}
	}
	if w.replicas == nil || *w.replicas < 2 {
		return []string{"the planner runs fewer than 2 replicas: one failure stops all scheduling"}
	}
	return nil
}

// autoscaler is an HPA or a KEDA ScaledObject, reduced to what the checks compare.
type autoscaler struct {
	what, targetKind, target string
	min, max                 int64
}

func (m *manifests) autoscalers() []autoscaler {
	var out []autoscaler
	for _, h := range ofType[*autoscalingv2.HorizontalPodAutoscaler](m) {
		min := int64(1)
		if h.Spec.MinReplicas != nil {
			min = int64(*h.Spec.MinReplicas)
		}
		out = append(out, autoscaler{"HorizontalPodAutoscaler/" + h.Name, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name, min, int64(h.Spec.MaxReplicas)})
	}
	for _, so := range m.ofKind("ScaledObject") {
		kind, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "kind")
		if kind == "" {
			kind = "Deployment" // KEDA's default
		}
		name, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "name")
		min, found, _ := unstructured.NestedInt64(so.Object, "spec", "minReplicaCount")
		if !found {
			min = 0 // KEDA's default
		}
		max, found, _ := unstructured.NestedInt64(so.Object, "spec", "maxReplicaCount")
		if !found {
			max = 100 // KEDA's default
		}
		out = append(out, autoscaler{"ScaledObject/" + so.GetName(), kind, name, min, max})
	}
	return out
}

// checkAutoscaling: the worker has exactly one autoscaler, every autoscaler targets an
// existing Deployment that leaves its replica count to it, and the bounds make sense.
func checkAutoscaling(m *manifests) []string {
	var problems []string
	owners := map[string][]string{}
	for _, a := range m.autoscalers() {
		w, ok := m.workload(a.targetKind, a.target)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s targets %s/%s, which does not exist", a.what, a.targetKind, a.target))
			continue
		}
		owners[w.String()] = append(owners[w.String()], a.what)
		if w.replicas != nil {
			problems = append(problems, fmt.Sprintf("%s sets replicas, which %s owns: every apply would reset it", w, a.what))
		}
		if a.min < 1 || a.min > a.max {
			problems = append(problems, fmt.Sprintf("%s: replicas from %d to %d, want 1 <= min <= max", a.what, a.min, a.max))
		}
	}
	for target, list := range owners {
		if len(list) > 1 {
			problems = append(problems, fmt.Sprintf("%s has %d autoscalers (%s): they would fight", target, len(list), strings.Join(list, ", ")))
		}
	}
	if len(owners["Deployment/worker"]) == 0 {
		problems = append(problems, "the worker Deployment has no autoscaler")
	}
	return problems
}

// checkScaledObjects: a KEDA ScaledObject watches the workers' consumer on the due stream,
// through the monitoring port of a NATS Service in the same namespace.
func checkScaledObjects(m *manifests, bus busContract) []string {
	var problems []string
	for _, so := range m.ofKind("ScaledObject") {
		what := "ScaledObject/" + so.GetName()
		target, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "name")
		prefix := defaultSubjectPrefix
		if w, ok := m.workload("Deployment", target); ok {
			if c, ok := w.container("worker"); ok {
				if v, set := m.envValue(c, "RESCHED_WORKER_SUBJECT_PREFIX"); set {
					prefix = v
				}
			}
		}
		triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
		var js map[string]any
		for _, t := range triggers {
			if t, ok := t.(map[string]any); ok && t["type"] == "nats-jetstream" {
				js, _ = t["metadata"].(map[string]any)
			}
		}
		if js == nil {
			problems = append(problems, what+": no nats-jetstream trigger")
			continue
		}
		want := map[string]string{"consumer": bus.workerConsumer, "stream": bus.dueStream(prefix)}
		for key, value := range want {
			if js[key] != value {
				problems = append(problems, fmt.Sprintf("%s: %s is %v, want %s", what, key, js[key], value))
			}
		}
		if account, _ := js["account"].(string); account == "" {
			problems = append(problems, what+": no account ($G without NATS accounts)")
		}
		if n, err := strconv.Atoi(fmt.Sprint(js["lagThreshold"])); err != nil || n < 1 {
			problems = append(problems, fmt.Sprintf("%s: lagThreshold %v is not a positive whole number", what, js["lagThreshold"]))
		}
		endpoint, _ := js["natsServerMonitoringEndpoint"].(string)
		if err := m.checkClusterAddress(endpoint, so.GetNamespace(), true); err != nil {
			problems = append(problems, fmt.Sprintf("%s: natsServerMonitoringEndpoint: %v", what, err))
		}
	}
	return problems
}

// checkClusterAddress checks that host:port names a Service of m and one of its ports. KEDA
// runs in its own namespace, so qualified requires <service>.<namespace>.svc[.cluster.local];
// otherwise a bare service name is accepted too.
func (m *manifests) checkClusterAddress(hostport, namespace string, qualified bool) error {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%q is not host:port", hostport)
	}
	labels := strings.Split(host, ".")
	inCluster := func(rest []string) bool { // "", or <namespace>.svc[.cluster.local]
		return (len(rest) == 0 && !qualified) || (len(rest) >= 2 && rest[0] == namespace && rest[1] == "svc" &&
			(len(rest) == 2 || strings.Join(rest[2:], ".") == "cluster.local"))
	}
	var s *corev1.Service
	switch {
	case inCluster(labels[1:]):
		if s = m.service(labels[0]); s == nil {
			return fmt.Errorf("no Service %s", labels[0])
		}
	case len(labels) >= 2 && inCluster(labels[2:]) && m.service(labels[1]) != nil:
		// <pod>.<headless service>: one server of a StatefulSet, as a cluster's clients list them.
		s = m.service(labels[1])
		if err := m.checkStatefulPod(labels[0], s); err != nil {
			return err
		}
	default:
		return fmt.Errorf("host %q is not <service>.%s.svc.cluster.local", host, namespace)
	}
	port, _ := strconv.Atoi(portText)
	if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == port }) {
		return fmt.Errorf("Service %s has no port %s", s.Name, portText)
	}
	return nil
}

// checkStatefulPod: pod is one of the pods of a StatefulSet governed by the headless Service s.
func (m *manifests) checkStatefulPod(pod string, s *corev1.Service) error {
	if s.Spec.ClusterIP != corev1.ClusterIPNone {
		return fmt.Errorf("%s.%s: Service %s is not headless, so its pods have no names", pod, s.Name, s.Name)
	}
	for _, sts := range ofType[*appsv1.StatefulSet](m) {
		i, err := strconv.Atoi(strings.TrimPrefix(pod, sts.Name+"-"))
		if sts.Spec.ServiceName != s.Name || !strings.HasPrefix(pod, sts.Name+"-") || err != nil {
			continue
		}
		replicas := 1
		if sts.Spec.Replicas != nil {
			replicas = int(*sts.Spec.Replicas)
		}
		if i < 0 || i >= replicas {
			return fmt.Errorf("%s.%s: StatefulSet %s has %d replicas", pod, s.Name, sts.Name, replicas)
		}
		return nil
	}
	return fmt.Errorf("%s.%s: no StatefulSet of Service %s has that pod", pod, s.Name, s.Name)
}
