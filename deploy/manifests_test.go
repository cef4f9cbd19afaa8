package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// kustomizations are the directories under deploy/ that `kubectl apply -k` accepts.
var kustomizations = []string{"base", "overlays/example", "overlays/scale-out"}

// readBusContract reads the worker consumer's name and the due stream's suffix from the code
// that creates them, so the KEDA trigger cannot drift from it.
func readBusContract(t *testing.T) busContract {
	t.Helper()
	file := filepath.Join(repoRoot, "services/internal/bus/bus.go")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	consumer := regexp.MustCompile(`WorkerConsumer\s*=\s*"([^"]+)"`).FindSubmatch(src)
	due := regexp.MustCompile(`DueStream\(\)\s+string\s*\{\s*return streamName\(s\.Prefix,\s*"([^"]+)"\)`).FindSubmatch(src)
	if consumer == nil || due == nil {
		t.Fatalf("%s no longer defines WorkerConsumer and DueStream as this test expects: update readBusContract", file)
	}
	return busContract{workerConsumer: string(consumer[1]), dueKind: string(due[1])}
}

func TestManifests(t *testing.T) {
	checks := manifestChecks(readBusContract(t))
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			m := buildDeploy(t, dir)
			for name, check := range checks {
				t.Run(name, func(t *testing.T) {
					for _, problem := range check(m) {
						t.Error(problem)
					}
				})
			}
		})
	}
}

// TestBaseScalesWorkersOnCPU: the base works on a cluster without KEDA.
func TestBaseScalesWorkersOnCPU(t *testing.T) {
	m := buildDeploy(t, "base")
	if n := len(m.ofKind("ScaledObject")); n != 0 {
		t.Errorf("the base holds %d ScaledObjects; it must apply where the KEDA CRD is missing", n)
	}
	hpas := ofType[*autoscalingv2.HorizontalPodAutoscaler](m)
	if len(hpas) != 1 || hpas[0].Spec.ScaleTargetRef.Name != "worker" {
		t.Fatalf("want one HorizontalPodAutoscaler for the worker, got %d", len(hpas))
	}
	if metrics := hpas[0].Spec.Metrics; len(metrics) == 0 || metrics[0].Resource == nil || metrics[0].Resource.Name != "cpu" {
		t.Errorf("the worker HPA does not scale on CPU: %+v", metrics)
	}
}

// TestExampleOverlay: the overlay switches to KEDA and sets what it says it sets.
func TestExampleOverlay(t *testing.T) {
	m := buildDeploy(t, "overlays/example")
	if n := len(ofType[*autoscalingv2.HorizontalPodAutoscaler](m)); n != 0 {
		t.Errorf("the overlay keeps %d HorizontalPodAutoscalers; the KEDA component should remove the base's", n)
	}
	if n := len(m.ofKind("ScaledObject")); n != 1 {
		t.Errorf("the overlay holds %d ScaledObjects, want 1", n)
	}
	for _, d := range ofType[*appsv1.Deployment](m) {
		image := d.Spec.Template.Spec.Containers[0].Image
		if want := "resched/" + d.Name + ":dev"; image != want {
			t.Errorf("Deployment/%s runs %s, want %s (images: in the overlay)", d.Name, image, want)
		}
	}
	worker, _ := m.workload("Deployment", "worker")
	c, _ := worker.container("worker")
	if v, _ := m.envValue(c, "RESCHED_WORKER_CONCURRENCY"); v != "32" {
		t.Errorf("RESCHED_WORKER_CONCURRENCY = %q, want the overlay's 32", v)
	}
	if v, _ := m.envValue(c, "RESCHED_WORKER_LOG_LEVEL"); v != "info" {
		t.Errorf("RESCHED_WORKER_LOG_LEVEL = %q: the overlay's merge lost the base's keys", v)
	}
}

func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	files := map[string]string{
		"kustomization.yaml": "resources: [deployment.yaml]\n",
		"deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
        - name: c
          image: x:1
          imagePullPolicyy: Always
`,
	}
	fsys := memFS(t, files)
	_, err := build(fsys, "/k")
	if err == nil || !strings.Contains(err.Error(), "imagePullPolicyy") {
		t.Fatalf("build = %v, want an error naming the unknown field", err)
	}
}

func TestUnregisteredKindIsRejected(t *testing.T) {
	fsys := memFS(t, map[string]string{
		"kustomization.yaml": "resources: [thing.yaml]\n",
		"thing.yaml":         "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\n",
	})
	if _, err := build(fsys, "/k"); err == nil || !strings.Contains(err.Error(), "Thing") {
		t.Fatalf("build = %v, want an error naming the unknown kind", err)
	}
}

// variant is a kustomization layered on one of deploy/'s, holding one mistake.
type variant struct {
	name  string
	from  string            // the kustomization under deploy/ to build on
	extra string            // the rest of the variant's kustomization.yaml
	files map[string]string // more resources
	check string            // the check that must report the mistake
	want  string            // a piece of the report
}

// TestManifestChecksCatchMistakes builds deploy/'s kustomizations with one mistake each and
// expects the check meant for it to report it, so a check that passes everything cannot hide
// behind correct manifests.
func TestManifestChecksCatchMistakes(t *testing.T) {
	checks := manifestChecks(readBusContract(t))
	for _, v := range mistakes {
		t.Run(v.name, func(t *testing.T) {
			fsys := deployFS(t)
			kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../" + v.from + "\n"
			for name := range v.files {
				kustomization += "  - " + name + "\n"
			}
			kustomization += v.extra
			write := func(name, content string) {
				if err := fsys.WriteFile("/deploy/variant/"+name, []byte(content)); err != nil {
					t.Fatal(err)
				}
			}
			write("kustomization.yaml", kustomization)
			for name, content := range v.files {
				write(name, content)
			}
			m, err := build(fsys, "/deploy/variant")
			if err != nil {
				t.Fatal(err)
			}
			problems := checks[v.check](m)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, v.want) }) {
				t.Errorf("check %q reported %q, want a problem containing %q", v.check, problems, v.want)
			}
		})
	}
}
