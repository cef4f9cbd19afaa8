package deploy

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// customKinds are the objects of custom resource definitions the manifests may hold. Their Go
// types live in the projects that own them (KEDA, the Prometheus Operator), too heavy to import for a test, so they are
// checked as unstructured objects.
var customKinds = map[schema.GroupVersionKind]bool{
	{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}:           true,
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}: true,
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor"}:     true,
}

// object is one object of a kustomize build: typed when Kubernetes defines the kind, and as
// plain fields always.
type object struct {
	gvk   schema.GroupVersionKind
	typed runtime.Object // nil for customKinds
	u     *unstructured.Unstructured
}

func (o object) String() string {
	return o.gvk.Kind + "/" + o.u.GetName()
}

// manifests are the objects one kustomization builds.
type manifests struct{ objects []object }

// ofType returns the typed objects of one Go type, e.g. ofType[*appsv1.Deployment](m).
func ofType[T runtime.Object](m *manifests) []T {
	var out []T
	for _, o := range m.objects {
		if t, ok := o.typed.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// ofKind returns the objects of one kind as plain fields.
func (m *manifests) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range m.objects {
		if o.gvk.Kind == kind {
			out = append(out, o.u)
		}
	}
	return out
}

// strictDecoder decodes the built-in kinds the manifests use, refusing unknown and duplicate
// fields: a misspelt field would otherwise be dropped by the API server without a word.
func strictDecoder() (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, autoscalingv2.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer(), nil
}

// decodeObject decodes one object of a build.
func decodeObject(decoder runtime.Decoder, doc []byte) (object, error) {
	// Through JSON, so numbers come out as int64 the way the unstructured helpers expect.
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return object{}, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return object{}, err
	}
	o := object{gvk: u.GroupVersionKind(), u: u}
	if customKinds[o.gvk] {
		return o, nil
	}
	typed, gvk, err := decoder.Decode(doc, nil, nil)
	if err != nil {
		return object{}, fmt.Errorf("%s %s: %w", o.gvk, u.GetName(), err)
	}
	if *gvk != o.gvk {
		return object{}, fmt.Errorf("%s %s decoded as %s", o.gvk, u.GetName(), gvk)
	}
	o.typed = typed
	return o, nil
}

// build runs kustomize on dir of fsys, as `kubectl kustomize` would, and decodes every object.
func build(fsys filesys.FileSystem, dir string) (*manifests, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	decoder, err := strictDecoder()
	if err != nil {
		return nil, err
	}
	m := &manifests{}
	for _, r := range rm.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		o, err := decodeObject(decoder, doc)
		if err != nil {
			return nil, err
		}
		m.objects = append(m.objects, o)
	}
	return m, nil
}

// deployFS is the deploy directory's YAML, .conf and .json files (kustomizations, manifests and
// the files ConfigMaps are generated from), copied into
// memory under /deploy, so a build reads the real files but cannot reach past them.
func deployFS(t *testing.T) filesys.FileSystem {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".conf") || strings.HasSuffix(p, ".json")) {
			return err
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fsys.WriteFile(path.Join("/deploy", filepath.ToSlash(p)), content)
	})
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// buildDeploy builds the kustomization in deploy/dir.
func buildDeploy(t *testing.T, dir string) *manifests {
	t.Helper()
	m, err := build(deployFS(t), path.Join("/deploy", dir))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// memFS holds files given by name under /k, for tests of the build and the checks.
func memFS(t *testing.T, files map[string]string) filesys.FileSystem {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	for name, content := range files {
		if err := fsys.WriteFile(path.Join("/k", name), []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	return fsys
}
