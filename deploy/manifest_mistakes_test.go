package deploy

// mistakes are the cases of TestManifestChecksCatchMistakes: one mistake each, on top of the
// real kustomizations. A read-only table.
var mistakes = []variant{
	{
		name: "pod labels the selector does not match", from: "base", check: "workload selectors", want: "Deployment/planner",
		extra: patch("apps/v1", "Deployment", "planner", `spec: {template: {metadata: {labels: {app.kubernetes.io/name: planner-x}}}}`),
	},
	{
		name: "Service on a port the pods do not declare", from: "base", check: "services", want: "no container port metrics",
		extra: jsonPatch("Service", "planner", `[{"op": "replace", "path": "/spec/ports/0/targetPort", "value": "metrics"}]`),
	},
	{
		name: "Secret key that does not exist", from: "base", check: "config and secret references", want: "redis-uri",
		extra: jsonPatch("Deployment", "planner", `[{"op": "replace", "path": "/spec/template/spec/containers/0/env/1/valueFrom/secretKeyRef/key", "value": "redis-uri"}]`),
	},
	{
		name: "ConfigMap key the planner does not read", from: "base", check: "service environment", want: "RESCHED_PLANNER_LOGLEVEL",
		extra: mergeConfig("planner-config", "RESCHED_PLANNER_LOGLEVEL=debug"),
	},
	{
		name: "planner without REDIS_URL", from: "base", check: "service environment", want: "REDIS_URL is not set",
		extra: jsonPatch("Deployment", "planner", `[{"op": "remove", "path": "/spec/template/spec/containers/0/env/1"}]`),
	},
	{
		name: "planner container renamed", from: "base", check: "service environment", want: "no container named planner",
		extra: jsonPatch("Deployment", "planner", `[{"op": "replace", "path": "/spec/template/spec/containers/0/name", "value": "main"}]`),
	},
	{
		name: "readiness probe on the liveness path", from: "base", check: "probes", want: "readiness probe on /healthz",
		extra: jsonPatch("Deployment", "planner", `[{"op": "replace", "path": "/spec/template/spec/containers/0/readinessProbe/httpGet/path", "value": "/healthz"}]`),
	},
	{
		name: "planner moved to another port, probes not", from: "base", check: "probes", want: "listens on 9000",
		extra: mergeConfig("planner-config", "RESCHED_PLANNER_HTTP_ADDR=:9000"),
	},
	{
		name: "one planner", from: "overlays/example", check: "planner replicas", want: "fewer than 2",
		extra: "replicas: [{name: planner, count: 1}]\n",
	},
	{
		name: "worker replicas fixed under an autoscaler", from: "base", check: "autoscaling", want: "sets replicas",
		extra: "replicas: [{name: worker, count: 3}]\n",
	},
	{
		name: "HPA and ScaledObject on the worker", from: "base", check: "autoscaling", want: "would fight",
		files: map[string]string{"scaledobject.yaml": `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: worker-extra, namespace: resched}
spec:
  scaleTargetRef: {name: worker}
  minReplicaCount: 1
`},
	},
	{
		name: "ScaledObject on the wrong consumer", from: "overlays/example", check: "KEDA triggers", want: "consumer",
		extra: kedaPatch(`[{"op": "replace", "path": "/spec/triggers/0/metadata/consumer", "value": "worker"}]`),
	},
	{
		name: "namespace changed, KEDA endpoint not", from: "overlays/example", check: "KEDA triggers", want: "natsServerMonitoringEndpoint",
		extra: "namespace: elsewhere\n",
	},
	{
		name: "worker on another subject prefix", from: "overlays/example", check: "shared settings", want: "different SUBJECT_PREFIX",
		extra: mergeConfig("worker-config", "RESCHED_WORKER_SUBJECT_PREFIX=other"),
	},
	{
		name: "worker with other stream replicas", from: "base", check: "shared settings", want: "different STREAM_REPLICAS",
		extra: mergeConfig("worker-config", "RESCHED_WORKER_STREAM_REPLICAS=3"),
	},
	{
		name: "worker prefix changed, KEDA stream not", from: "overlays/example", check: "KEDA triggers", want: "OTHER_DUE",
		extra: mergeConfig("worker-config", "RESCHED_WORKER_SUBJECT_PREFIX=other"),
	},
	{
		name: "Redis without an append-only file", from: "base", check: "persistent storage", want: "appendonly",
		extra: jsonPatch("StatefulSet", "redis", `[{"op": "replace", "path": "/spec/template/spec/containers/0/args/3", "value": "no"}]`),
	},
	{
		name: "NATS writing outside its volume", from: "base", check: "persistent storage", want: "/tmp",
		extra: jsonPatch("StatefulSet", "nats", `[{"op": "replace", "path": "/spec/template/spec/containers/0/args/2", "value": "--store_dir=/tmp"}]`),
	},
	{
		name: "privilege escalation allowed", from: "base", check: "security context", want: "allowPrivilegeEscalation",
		extra: jsonPatch("Deployment", "worker", `[{"op": "replace", "path": "/spec/template/spec/containers/0/securityContext/allowPrivilegeEscalation", "value": true}]`),
	},
	{
		name: "image without a fixed tag", from: "base", check: "image tags", want: "no fixed tag",
		extra: "images: [{name: resched/worker, newTag: latest}]\n",
	},
	{
		name: "REDIS_URL with another password than Redis's", from: "base", check: "connection URLs", want: "password differs",
		extra: secretPatch("redis-url", "redis://:other@redis:6379/0"),
	},
	{
		name: "NATS_URL naming no Service", from: "base", check: "connection URLs", want: "no Service natz",
		extra: secretPatch("nats-url", "nats://natz:4222"),
	},
	{
		name: "planner logging in as the worker", from: "base", check: "authentication", want: `nats.conf gives user "worker"`,
		extra: mergeConfig("planner-config", "NATS_USER=worker"),
	},
	{
		name: "NATS without its configuration", from: "base", check: "authentication", want: "without a configuration",
		extra: jsonPatch("StatefulSet", "nats", `[{"op": "remove", "path": "/spec/template/spec/containers/0/args/0"}]`),
	},
	{
		name: "planner with the wrong Redis password", from: "base", check: "authentication", want: "REDIS_PASSWORD",
		extra: jsonPatch("Deployment", "planner", `[{"op": "replace", "path": "/spec/template/spec/volumes/0/secret/items/1/key", "value": "nats-admin-password"}]`),
	},
	{
		name: "worker whose password file is not mounted", from: "base", check: "authentication", want: "worker: NATS_PASSWORD is not",
		extra: jsonPatch("Deployment", "worker", `[{"op": "remove", "path": "/spec/template/spec/volumes/0"}, {"op": "remove", "path": "/spec/template/spec/containers/0/volumeMounts/0"}]`),
	},
	{
		name: "worker without the secret keys", from: "base", check: "authentication", want: "not in a mounted Secret",
		extra: jsonPatch("Deployment", "worker", `[{"op": "remove", "path": "/spec/template/spec/volumes"}, {"op": "remove", "path": "/spec/template/spec/containers/0/volumeMounts"}]`),
	},
	{
		name: "gateway without its access file", from: "base", check: "authentication", want: "gateway: RESCHED_GATEWAY_ACCESS_FILE",
		extra: jsonPatch("Deployment", "gateway", `[{"op": "remove", "path": "/spec/template/spec/volumes"}, {"op": "remove", "path": "/spec/template/spec/containers/0/volumeMounts"}]`),
	},
	{
		name: "gateway logging in as the planner", from: "base", check: "authentication", want: `nats.conf gives user "planner"`,
		extra: mergeConfig("gateway-config", "NATS_USER=planner"),
	},
	{
		name: "no default deny", from: "base", check: "network policies", want: "denies ingress by default",
		extra: patch("networking.k8s.io/v1", "NetworkPolicy", "default-deny-ingress", "$patch: delete"),
	},
	{
		name: "Redis open to the workers", from: "base", check: "network policies", want: "worker can reach Redis",
		extra: jsonPatch("NetworkPolicy", "redis", `[{"op": "add", "path": "/spec/ingress/0/from/-", "value": {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "worker"}}}}]`),
	},
	{
		name: "planners shut out of NATS", from: "base", check: "network policies", want: "planner cannot reach NATS",
		extra: jsonPatch("NetworkPolicy", "nats", `[{"op": "remove", "path": "/spec/ingress/0/from/0"}]`),
	},
	{
		name: "a fourth NATS server no route names", from: "overlays/scale-out", check: "NATS cluster", want: "nats-3.nats",
		extra: "replicas: [{name: nats, count: 4}]\n",
	},
	{
		name: "NATS routes blocked", from: "overlays/scale-out", check: "NATS cluster", want: "reaching each other",
		extra: jsonPatch("NetworkPolicy", "nats", `[{"op": "remove", "path": "/spec/ingress/2"}]`),
	},
	{
		name: "three replicas on one NATS server", from: "overlays/scale-out", check: "NATS cluster", want: "3 stream replicas on 1",
		extra: "replicas: [{name: nats, count: 1}]\n",
	},
	{
		name: "NATS servers stopped without lame duck mode", from: "overlays/scale-out", check: "NATS lame duck", want: "no preStop",
		extra: jsonPatch("StatefulSet", "nats", `[{"op": "remove", "path": "/spec/template/spec/containers/0/lifecycle"}]`),
	},
	{
		name: "NATS preStop reading another process id file", from: "overlays/scale-out", check: "NATS lame duck", want: "writes its process id",
		extra: jsonPatch("StatefulSet", "nats", `[{"op": "replace", "path": "/spec/template/spec/containers/0/lifecycle/preStop/exec/command/2", "value": "nats-server --signal ldm=/tmp/nats.pid && while kill -0 1; do sleep 1; done"}]`),
	},
	{
		name: "NATS preStop that does not wait for lame duck mode", from: "overlays/scale-out", check: "NATS lame duck", want: "returns once it has signalled",
		extra: jsonPatch("StatefulSet", "nats", `[{"op": "replace", "path": "/spec/template/spec/containers/0/lifecycle/preStop/exec/command", "value": ["nats-server", "--signal", "ldm=/var/run/nats/nats.pid"]}]`),
	},
	{
		name: "NATS process id file on the read-only root", from: "overlays/scale-out", check: "NATS lame duck", want: "no writable volume",
		extra: jsonPatch("StatefulSet", "nats", `[{"op": "remove", "path": "/spec/template/spec/containers/0/volumeMounts/0"}]`),
	},
	{
		name: "NATS lame duck longer than the pods' grace", from: "overlays/scale-out", check: "NATS lame duck", want: "killed 10s",
		extra: jsonPatch("StatefulSet", "nats", `[{"op": "replace", "path": "/spec/template/spec/terminationGracePeriodSeconds", "value": 10}]`),
	},
	{
		name: "NATS lame duck left at its default of 2 minutes", from: "overlays/scale-out", check: "NATS lame duck", want: "2m1s",
		extra: mergeConfig("nats-config", "nats.conf=jetstream enabled"),
	},
	{
		name: "NATS_URL naming a server that does not exist", from: "overlays/scale-out", check: "connection URLs", want: "has 2 replicas",
		extra: "replicas: [{name: nats, count: 2}]\n",
	},
	{
		name: "Redis Cluster password in the URL", from: "overlays/scale-out", check: "connection URLs", want: "holds credentials",
		extra: secretPatch("redis-url", "redis+cluster://:pw@redis-cluster-0.redis-cluster:6379/"),
	},
	{
		name: "Namespace missing", from: "base", check: "namespace", want: "0 Namespace objects",
		extra: patch("v1", "Namespace", "resched", "$patch: delete"),
	},
}

// patch is a strategic-merge patch of one object, as kustomization.yaml lines.
func patch(apiVersion, kind, name, body string) string {
	return "patches:\n  - patch: |-\n      apiVersion: " + apiVersion + "\n      kind: " + kind +
		"\n      metadata: {name: " + name + "}\n      " + body + "\n"
}

// jsonPatch is a JSON 6902 patch (written as YAML) of one object.
func jsonPatch(kind, name, ops string) string {
	return "patches:\n  - target: {kind: " + kind + ", name: " + name + "}\n    patch: '" + ops + "'\n"
}

func kedaPatch(ops string) string {
	return "patches:\n  - target: {group: keda.sh, kind: ScaledObject, name: worker}\n    patch: '" + ops + "'\n"
}

func secretPatch(key, value string) string {
	return patch("v1", "Secret", "resched-secrets", "stringData: {"+key+": \""+value+"\"}")
}

func mergeConfig(name, literal string) string {
	return "configMapGenerator:\n  - name: " + name + "\n    behavior: merge\n    literals: [" + literal + "]\n"
}
