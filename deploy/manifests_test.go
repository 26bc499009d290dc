package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/deploy/image"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/server"
	"go.yaml.in/yaml/v3"
)

// object is a parsed YAML or JSON object.
type object = map[string]any

// readYAML returns the documents of the YAML file path.
func readYAML(t *testing.T, path string) []object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []object
	for {
		var doc object
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// dig returns the value at the path of keys (strings) and indexes (ints)
// in v, or nil.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(object)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string { s, _ := dig(v, path...).(string); return s }
func list(v any, path ...any) []any { l, _ := dig(v, path...).([]any); return l }

// kubernetes is the objects of kubernetes/*.yaml, by kind and name.
func kubernetes(t *testing.T) map[string]object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no kubernetes/*.yaml: %v", err)
	}
	objs := map[string]object{}
	for _, f := range files {
		for _, doc := range readYAML(t, f) {
			kind, name := str(doc, "kind"), str(doc, "metadata", "name")
			if kind == "" || name == "" || str(doc, "apiVersion") == "" {
				t.Fatalf("%s: an object without apiVersion, kind or metadata.name", f)
			}
			objs[kind+"/"+name] = doc
		}
	}
	return objs
}

// port returns the port of the address addr (":8080", "127.0.0.1:8080").
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return n
}

// flagValues returns serve's flags in args (after "serve") with their
// values, failing t for a flag that `floodgate serve -h` does not list.
func flagValues(t *testing.T, args []string, known map[string]bool) map[string]string {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("arguments %q do not start with serve", args)
	}
	vals := map[string]string{}
	for i := 1; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			t.Fatalf("argument %q of %q is not a flag", args[i], args)
		}
		if !known[name] {
			t.Errorf("flag --%s: floodgate serve -h does not list it", name)
		}
		if name == "pprof" || name == "envoy-shadow-mode" {
			vals[name] = "true"
			continue
		}
		i++
		if i == len(args) {
			t.Fatalf("flag --%s has no value", name)
		}
		vals[name] = args[i]
	}
	return vals
}

// wantPorts are serve's default ports, by the name the manifests give them.
func wantPorts(t *testing.T) map[string]int {
	return map[string]int{
		"http":    port(t, server.DefaultHTTPAddr),
		"grpc":    port(t, server.DefaultGRPCAddr),
		"metrics": port(t, server.DefaultMetricsAddr),
	}
}

// floodgateContainer is the Deployment's floodgate container.
func floodgateContainer(t *testing.T, objs map[string]object) object {
	t.Helper()
	dep := objs["Deployment/floodgate"]
	c, _ := dig(dep, "spec", "template", "spec", "containers", 0).(object)
	if c == nil || str(c, "name") != "floodgate" {
		t.Fatalf("Deployment/floodgate has no container floodgate")
	}
	return c
}

func stringsOf(l []any) []string {
	var out []string
	for _, v := range l {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// TestImageArgs checks the image's arguments: serve's flags, on serve's
// default ports, on every interface.
func TestImageArgs(t *testing.T) {
	vals := flagValues(t, image.DefaultArgs, serveFlags(t, imageBinary(t)))
	for name, want := range wantPorts(t) {
		if got := vals[name]; got != ":"+strconv.Itoa(want) {
			t.Errorf("the image's --%s %q, want :%d", name, got, want)
		}
		if !slices.Contains(image.ExposedPorts, fmt.Sprintf("%d/tcp", want)) {
			t.Errorf("the image does not expose %d/tcp (%s)", want, name)
		}
	}
}

func TestKubernetesDeployment(t *testing.T) {
	objs := kubernetes(t)
	c := floodgateContainer(t, objs)
	vals := flagValues(t, stringsOf(list(c, "args")), serveFlags(t, imageBinary(t)))
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		ports[str(p, "name")] = dig(p, "containerPort").(int)
	}
	for name, want := range wantPorts(t) {
		if ports[name] != want {
			t.Errorf("container port %s: %d, want %d (serve's default)", name, ports[name], want)
		}
		if got := vals[name]; got != ":"+strconv.Itoa(want) {
			t.Errorf("--%s %q, want :%d, every interface of the pod", name, got, want)
		}
	}
	checkProbes(t, c)
	checkMounts(t, objs, c, vals)
	checkSecurity(t, dig(objs["Deployment/floodgate"], "spec", "template", "spec").(object), c)
	checkRedis(t, objs, vals["store"])
}

// checkProbes checks the probes' paths and ports, and that those paths
// answer 200 on a real server's operations handler.
func checkProbes(t *testing.T, c object) {
	t.Helper()
	srv, err := server.New(memstore.New(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	ops := httptest.NewServer(srv.OpsHandler())
	defer ops.Close()
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if got := str(c, probe, "httpGet", "path"); got != path {
			t.Errorf("%s path %q, want %s", probe, got, path)
		}
		if got := dig(c, probe, "httpGet", "port"); got != "metrics" {
			t.Errorf("%s port %v, want metrics", probe, got)
		}
		assertGet(t, ops.URL+path, http.StatusOK)
	}
}

// checkMounts checks that --config and --envoy-config name what the
// ConfigMaps mount.
func checkMounts(t *testing.T, objs map[string]object, c object, vals map[string]string) {
	t.Helper()
	mounts := map[string]string{} // volume name: mount path
	for _, m := range list(c, "volumeMounts") {
		mounts[str(m, "name")] = str(m, "mountPath")
	}
	maps := map[string]string{} // mount path: ConfigMap
	for _, v := range list(objs["Deployment/floodgate"], "spec", "template", "spec", "volumes") {
		maps[mounts[str(v, "name")]] = str(v, "configMap", "name")
	}
	cfgMap := objs["ConfigMap/"+maps[filepath.Dir(vals["config"])]]
	if dig(cfgMap, "data", filepath.Base(vals["config"])) == nil {
		t.Errorf("--config %s: no ConfigMap mounted there has %s", vals["config"], filepath.Base(vals["config"]))
	}
	if objs["ConfigMap/"+maps[vals["envoy-config"]]] == nil {
		t.Errorf("--envoy-config %s: no ConfigMap is mounted there", vals["envoy-config"])
	}
}

func checkSecurity(t *testing.T, pod, c object) {
	t.Helper()
	uid := fmt.Sprint(dig(pod, "securityContext", "runAsUser"))
	assertNonRoot(t, "the pod", uid)
	if uid+":"+uid != image.User {
		t.Errorf("the pod runs as %s, the image as %s", uid, image.User)
	}
	if dig(c, "securityContext", "readOnlyRootFilesystem") != true {
		t.Errorf("the container's root filesystem is writable")
	}
}

// checkRedis checks that --store names the Redis Service's name and port.
func checkRedis(t *testing.T, objs map[string]object, store string) {
	t.Helper()
	host, ok := strings.CutPrefix(store, "redis://")
	if !ok {
		t.Fatalf("--store %q, want redis://", store)
	}
	name, p, _ := net.SplitHostPort(host)
	svc := objs["Service/"+name]
	if svc == nil {
		t.Fatalf("--store %s: no Service %s", store, name)
	}
	if got := fmt.Sprint(dig(svc, "spec", "ports", 0, "port")); got != p {
		t.Errorf("--store %s: Service %s's port is %s", store, name, got)
	}
	if objs["Deployment/"+name] == nil {
		t.Errorf("--store %s: no Deployment %s", store, name)
	}
}

// TestKubernetesServiceAndBudget checks that the Service and the
// PodDisruptionBudget select the Deployment's pods and name its ports.
func TestKubernetesServiceAndBudget(t *testing.T) {
	objs := kubernetes(t)
	dep := objs["Deployment/floodgate"]
	labels, _ := dig(dep, "spec", "template", "metadata", "labels").(object)
	selects := func(sel any) bool {
		m, _ := sel.(object)
		for k, v := range m {
			if labels[k] != v {
				return false
			}
		}
		return len(m) > 0
	}
	svc, pdb := objs["Service/floodgate"], objs["PodDisruptionBudget/floodgate"]
	if !selects(dig(svc, "spec", "selector")) {
		t.Errorf("Service/floodgate does not select the Deployment's pods")
	}
	if !selects(dig(pdb, "spec", "selector", "matchLabels")) {
		t.Errorf("PodDisruptionBudget/floodgate does not select the Deployment's pods")
	}
	if min, ok := dig(pdb, "spec", "minAvailable").(int); !ok || min >= dig(dep, "spec", "replicas").(int) {
		t.Errorf("the budget's minAvailable %v lets no pod be evicted of %v", min, dig(dep, "spec", "replicas"))
	}
	for name, want := range wantPorts(t) {
		found := false
		for _, p := range list(svc, "spec", "ports") {
			if str(p, "name") == name {
				found = true
				if dig(p, "port") != want || str(p, "targetPort") != name {
					t.Errorf("Service port %s: %v -> %v, want %d -> %s", name, dig(p, "port"), dig(p, "targetPort"), want, name)
				}
			}
		}
		if !found {
			t.Errorf("Service/floodgate has no port %s", name)
		}
	}
}

// TestKubernetesRuns runs the Deployment's floodgate (startDeployment) and
// checks that it is ready and decides with the ConfigMaps' policies.
func TestKubernetesRuns(t *testing.T) {
	addrs := startDeployment(t)
	assertGet(t, "http://"+addrs["metrics"]+"/readyz", http.StatusOK)
	resp, err := http.Post("http://"+addrs["http"]+"/v1/check", "application/json", strings.NewReader(`{"policy":"login","key":"alice"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"allowed":true`) {
		t.Errorf("POST /v1/check policy login: %d %s", resp.StatusCode, body)
	}
	if addrs["grpc"] == "" {
		t.Errorf("the Deployment's floodgate does not serve Envoy's gRPC service")
	}
}

// startDeployment runs the image's floodgate with the Deployment's
// arguments, the ConfigMaps' files where it mounts them and a real Redis
// where --store names one (later flags moving the addresses to loopback,
// the store to that Redis and the paths to a temporary directory), and
// returns its addresses by name.
func startDeployment(t *testing.T) map[string]string {
	t.Helper()
	objs := kubernetes(t)
	c := floodgateContainer(t, objs)
	args := stringsOf(list(c, "args"))
	vals := flagValues(t, args, serveFlags(t, imageBinary(t)))
	dir := t.TempDir()
	configDir, envoyDir := filepath.Join(dir, "config"), filepath.Join(dir, "envoy")
	writeConfigMap(t, objs["ConfigMap/floodgate-config"], configDir)
	writeConfigMap(t, objs["ConfigMap/floodgate-envoy"], envoyDir)
	redis := redistest.NewServer(t)
	args = append(args, "--store", redis.URL(), "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
		"--config", filepath.Join(configDir, filepath.Base(vals["config"])), "--envoy-config", envoyDir)
	return startServe(t, imageBinary(t), args)
}

// writeConfigMap writes the data of the ConfigMap cm into dir.
func writeConfigMap(t *testing.T, cm object, dir string) {
	t.Helper()
	data, _ := dig(cm, "data").(object)
	if len(data) == 0 {
		t.Fatalf("ConfigMap %s has no data", str(cm, "metadata", "name"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprint(v)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// envoyDomains are the domains of the envoy ConfigMap's files.
func envoyDomains(t *testing.T) map[string]bool {
	t.Helper()
	domains := map[string]bool{}
	data, _ := dig(kubernetes(t)["ConfigMap/floodgate-envoy"], "data").(object)
	for name, v := range data {
		var f struct{ Domain string }
		if err := yaml.Unmarshal([]byte(fmt.Sprint(v)), &f); err != nil {
			t.Fatalf("ConfigMap floodgate-envoy %s: %v", name, err)
		}
		domains[f.Domain] = true
	}
	return domains
}

// jsonOf is v as JSON.
func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
