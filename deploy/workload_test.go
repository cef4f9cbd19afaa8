package deploy

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// workload is a Deployment or a StatefulSet: what the checks need of either.
type workload struct {
	kind, name string
	replicas   *int32
	selector   *metav1.LabelSelector
	pod        corev1.PodTemplateSpec
}

func (w workload) String() string { return w.kind + "/" + w.name }

func (m *manifests) workloads() []workload {
	var out []workload
	for _, d := range ofType[*appsv1.Deployment](m) {
		out = append(out, workload{"Deployment", d.Name, d.Spec.Replicas, d.Spec.Selector, d.Spec.Template})
	}
	for _, s := range ofType[*appsv1.StatefulSet](m) {
		out = append(out, workload{"StatefulSet", s.Name, s.Spec.Replicas, s.Spec.Selector, s.Spec.Template})
	}
	return out
}

func (m *manifests) workload(kind, name string) (workload, bool) {
	for _, w := range m.workloads() {
		if w.kind == kind && w.name == name {
			return w, true
		}
	}
	return workload{}, false
}

// selectedBy reports whether a label selector picks the workload's pods. An empty or invalid
// selector selects nothing here: both are mistakes in these manifests.
func (w workload) selectedBy(sel *metav1.LabelSelector) bool {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(w.pod.Labels))
}

// container returns the workload's container of that name.
func (w workload) container(name string) (corev1.Container, bool) {
	for _, c := range w.pod.Spec.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}

// containerPort resolves a probe's or a Service's port, by number or by name, to a container
// port of the workload; 0 when no container declares it.
func (w workload) containerPort(port intstr.IntOrString) int32 {
	for _, c := range w.pod.Spec.Containers {
		if n := portOf(c, port); n != 0 {
			return n
		}
	}
	return 0
}

func portOf(c corev1.Container, port intstr.IntOrString) int32 {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) ||
			(port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort
		}
	}
	return 0
}

func (m *manifests) configMap(name string) *corev1.ConfigMap {
	for _, c := range ofType[*corev1.ConfigMap](m) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (m *manifests) secret(name string) *corev1.Secret {
	for _, s := range ofType[*corev1.Secret](m) {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (m *manifests) service(name string) *corev1.Service {
	for _, s := range ofType[*corev1.Service](m) {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// secretValue is a key of a Secret as the container sees it, from stringData or data.
func secretValue(s *corev1.Secret, key string) (string, bool) {
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	v, ok := s.Data[key]
	return string(v), ok
}

// envValue is the value of an environment variable in the container, following env (which
// wins) and envFrom into the ConfigMaps and Secrets of m, and else X_FILE into the Secret
// mounted there, as the services read it. ok is false when the variable is not set, or set
// from something the manifests do not hold (a field of the pod, a resource).
func (m *manifests) envValue(c corev1.Container, name string) (string, bool) {
	if v, ok := m.envSet(c, name); ok || strings.HasSuffix(name, "_FILE") {
		return v, ok
	}
	file, ok := m.envSet(c, name+"_FILE")
	if !ok {
		return "", false
	}
	ref, err := secretFile(c, m.podOf(c.Name), file)
	if err != nil {
		return "", false
	}
	secretName, key, _ := strings.Cut(ref, "/")
	if s := m.secret(secretName); s != nil {
		return secretValue(s, key)
	}
	return "", false
}

// envSet is the value of a variable set in the container itself, through env or envFrom.
func (m *manifests) envSet(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name != name {
			continue
		}
		switch {
		case e.ValueFrom == nil:
			return e.Value, true
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			if cm := m.configMap(ref.Name); cm != nil {
				v, ok := cm.Data[ref.Key]
				return v, ok
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if s := m.secret(ref.Name); s != nil {
				return secretValue(s, ref.Key)
			}
		}
		return "", false
	}
	for _, from := range c.EnvFrom {
		key, found := strings.CutPrefix(name, from.Prefix)
		if !found {
			continue
		}
		if from.ConfigMapRef != nil {
			if cm := m.configMap(from.ConfigMapRef.Name); cm != nil {
				if v, ok := cm.Data[key]; ok {
					return v, true
				}
			}
		}
		if from.SecretRef != nil {
			if s := m.secret(from.SecretRef.Name); s != nil {
				if v, ok := secretValue(s, key); ok {
					return v, true
				}
			}
		}
	}
	return "", false
}

// envNames are the names of every variable the container is given, env and envFrom.
func (m *manifests) envNames(c corev1.Container) []string {
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			if cm := m.configMap(from.ConfigMapRef.Name); cm != nil {
				for k := range cm.Data {
					names = append(names, from.Prefix+k)
				}
			}
		}
		if from.SecretRef != nil {
			if s := m.secret(from.SecretRef.Name); s != nil {
				for k := range s.StringData {
					names = append(names, from.Prefix+k)
				}
				for k := range s.Data {
					names = append(names, from.Prefix+k)
				}
			}
		}
	}
	return names
}

// flagValue finds a command-line flag's value in args, written --name=value or --name value.
func flagValue(args []string, names ...string) (string, bool) {
	for i, a := range args {
		for _, n := range names {
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v, true
			}
			if a == n && i+1 < len(args) {
				return args[i+1], true
			}
		}
	}
	return "", false
}

// listenPort is the port of a host:port or :port listen address.
func listenPort(addr string) (int32, bool) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(addr[i+1:], 10, 32)
	return int32(n), err == nil && n > 0
}
