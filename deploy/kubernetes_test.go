package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kinds are the Kubernetes types of the manifests, by apiVersion and kind:
// a manifest of any other kind fails the test.
var kinds = map[string]func() runtime.Object{
	"v1/Namespace":                       func() runtime.Object { return new(corev1.Namespace) },
	"v1/ConfigMap":                       func() runtime.Object { return new(corev1.ConfigMap) },
	"v1/Service":                         func() runtime.Object { return new(corev1.Service) },
	"apps/v1/Deployment":                 func() runtime.Object { return new(appsv1.Deployment) },
	"policy/v1/PodDisruptionBudget":      func() runtime.Object { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy": func() runtime.Object { return new(networkingv1.NetworkPolicy) },
}

// typedManifests decodes every object of kubernetes/*.yaml into its
// Kubernetes API type, strictly: a field the type does not have, or a key
// given twice, fails t. It returns the objects by kind/name, and the
// files in the order kubectl apply -f reads them.
func typedManifests(t *testing.T) (map[string]runtime.Object, []string) {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no kubernetes/*.yaml: %v", err)
	}
	objs := map[string]runtime.Object{}
	for _, f := range files {
		for i, doc := range yamlDocuments(t, f) {
			obj, name, err := decodeStrict(doc)
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i+1, err)
			}
			objs[name] = obj
		}
	}
	return objs, files
}

// yamlDocuments splits the YAML file path into its documents.
func yamlDocuments(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

// decodeStrict decodes doc into the type its apiVersion and kind name,
// rejecting unknown and duplicate fields, and returns it with its
// kind/name.
func decodeStrict(doc []byte) (runtime.Object, string, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, "", err
	}
	newObj := kinds[tm.APIVersion+"/"+tm.Kind]
	if newObj == nil {
		return nil, "", fmt.Errorf("apiVersion %q kind %q: not a type this test knows", tm.APIVersion, tm.Kind)
	}
	obj := newObj()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, "", fmt.Errorf("%s: %w", tm.Kind, err)
	}
	meta := obj.(metav1.Object)
	if meta.GetName() == "" {
		return nil, "", fmt.Errorf("%s without metadata.name", tm.Kind)
	}
	return obj, tm.Kind + "/" + meta.GetName(), nil
}

func TestDecodeStrictRefusesUnknownFields(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {selectr: {app: a}}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: a, name: b}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
	} {
		if _, _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("decodeStrict accepted %q", doc)
		}
	}
}

// TestKubernetesNamespace checks that every object is in the namespace of
// the Namespace manifest, that kubectl apply -f reads that one first, and
// that it enforces the restricted Pod Security Standard.
func TestKubernetesNamespace(t *testing.T) {
	objs, files := typedManifests(t)
	ns, ok := objs["Namespace/floodgate"].(*corev1.Namespace)
	if !ok {
		t.Fatal("no Namespace floodgate in kubernetes/")
	}
	if slices.IndexFunc(files, func(f string) bool { return bytes.Contains(mustRead(t, f), []byte("kind: Namespace")) }) != 0 {
		t.Errorf("the Namespace is not in the first file kubectl apply -f reads, %s", files[0])
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("the Namespace enforces Pod Security Standard %q, want restricted", got)
	}
	for name, obj := range objs {
		if _, isNS := obj.(*corev1.Namespace); !isNS && obj.(metav1.Object).GetNamespace() != ns.Name {
			t.Errorf("%s is in namespace %q, want %q", name, obj.(metav1.Object).GetNamespace(), ns.Name)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestKubernetesRestricted checks every pod template against the
// restricted Pod Security Standard (its latest version).
func TestKubernetesRestricted(t *testing.T) {
	objs, _ := typedManifests(t)
	n := 0
	for name, obj := range objs {
		if d, ok := obj.(*appsv1.Deployment); ok {
			n++
			for _, v := range restrictedViolations(&d.Spec.Template.Spec) {
				t.Errorf("%s: %s", name, v)
			}
		}
	}
	if n < 2 {
		t.Errorf("%d Deployments checked, want floodgate's and Redis's", n)
	}
}

func TestRestrictedViolations(t *testing.T) {
	if v := restrictedViolations(&corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}); len(v) < 4 {
		t.Errorf("a pod with no security context: %d violations %q, want at least 4", len(v), v)
	}
}

// restrictedViolations are what keeps spec from the restricted Pod
// Security Standard, its baseline controls included.
func restrictedViolations(spec *corev1.PodSpec) []string {
	v := podViolations(spec)
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, msg := range containerViolations(spec.SecurityContext, &c) {
			v = append(v, "container "+c.Name+": "+msg)
		}
	}
	return v
}

// restrictedVolumes are the volume types the restricted standard allows.
var restrictedVolumes = func(v corev1.VolumeSource) bool {
	return v.ConfigMap != nil || v.CSI != nil || v.DownwardAPI != nil || v.EmptyDir != nil ||
		v.Ephemeral != nil || v.PersistentVolumeClaim != nil || v.Projected != nil || v.Secret != nil
}

// podViolations are the pod-level controls: host namespaces, volumes,
// sysctls, and a seccomp profile that is not Unconfined.
func podViolations(spec *corev1.PodSpec) []string {
	var v []string
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		v = append(v, "shares a host namespace")
	}
	for _, vol := range spec.Volumes {
		if !restrictedVolumes(vol.VolumeSource) {
			v = append(v, "volume "+vol.Name+" is of a type the standard forbids")
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		if len(sc.Sysctls) > 0 {
			v = append(v, "sets sysctls")
		}
		if sc.SeccompProfile != nil && !seccompAllowed(sc.SeccompProfile) {
			v = append(v, "pod seccomp profile "+string(sc.SeccompProfile.Type))
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			v = append(v, "pod runs as user 0")
		}
		v = append(v, seLinuxViolations(sc.SELinuxOptions)...)
	}
	return v
}

func seccompAllowed(p *corev1.SeccompProfile) bool {
	return p.Type == corev1.SeccompProfileTypeRuntimeDefault || p.Type == corev1.SeccompProfileTypeLocalhost
}

func seLinuxViolations(o *corev1.SELinuxOptions) []string {
	if o == nil {
		return nil
	}
	if o.User != "" || o.Role != "" || !slices.Contains([]string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}, o.Type) {
		return []string{"SELinux options the standard forbids"}
	}
	return nil
}

// containerViolations are the container-level controls, each satisfied by
// the container's security context or, where the standard allows, the
// pod's.
func containerViolations(pod *corev1.PodSecurityContext, c *corev1.Container) []string {
	if pod == nil {
		pod = new(corev1.PodSecurityContext)
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = new(corev1.SecurityContext)
	}
	var v []string
	if sc.Privileged != nil && *sc.Privileged {
		v = append(v, "privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		v = append(v, "allowPrivilegeEscalation is not false")
	}
	if !ptrTrue(sc.RunAsNonRoot) && !ptrTrue(pod.RunAsNonRoot) {
		v = append(v, "runAsNonRoot is not true")
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		v = append(v, "runs as user 0")
	}
	if p := cmpSeccomp(sc.SeccompProfile, pod.SeccompProfile); p == nil || !seccompAllowed(p) {
		v = append(v, "no seccompProfile RuntimeDefault or Localhost")
	}
	v = append(v, capabilityViolations(sc.Capabilities)...)
	v = append(v, seLinuxViolations(sc.SELinuxOptions)...)
	if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
		v = append(v, "procMount is not Default")
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			v = append(v, fmt.Sprintf("host port %d", p.HostPort))
		}
	}
	return v
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// cmpSeccomp is the container's seccomp profile, else the pod's.
func cmpSeccomp(container, pod *corev1.SeccompProfile) *corev1.SeccompProfile {
	if container != nil {
		return container
	}
	return pod
}

// capabilityViolations: ALL dropped, nothing added but NET_BIND_SERVICE.
func capabilityViolations(c *corev1.Capabilities) []string {
	if c == nil || !slices.Contains(c.Drop, "ALL") {
		return []string{"capabilities do not drop ALL"}
	}
	for _, add := range c.Add {
		if add != "NET_BIND_SERVICE" {
			return []string{"adds capability " + string(add)}
		}
	}
	return nil
}

// TestKubernetesTopologySpread checks that floodgate's replicas spread
// over zones and nodes, counting the Deployment's own pods.
func TestKubernetesTopologySpread(t *testing.T) {
	objs, _ := typedManifests(t)
	d := objs["Deployment/floodgate"].(*appsv1.Deployment)
	keys := map[string]bool{}
	for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("spread over %s: the selector does not select the Deployment's pods (%v)", c.TopologyKey, err)
		}
		keys[c.TopologyKey] = true
	}
	for _, k := range []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"} {
		if !keys[k] {
			t.Errorf("the replicas do not spread over %s", k)
		}
	}
}

// TestKubernetesNetworkPolicy checks that a NetworkPolicy isolates each
// Deployment's pods, that floodgate's admit their container ports, and
// that only floodgate reaches Redis, at its port.
func TestKubernetesNetworkPolicy(t *testing.T) {
	objs, _ := typedManifests(t)
	fg := objs["Deployment/floodgate"].(*appsv1.Deployment).Spec.Template
	redis := objs["Deployment/floodgate-redis"].(*appsv1.Deployment).Spec.Template
	fgPolicy, redisPolicy := policyOf(t, objs, fg.Labels), policyOf(t, objs, redis.Labels)
	for _, p := range fg.Spec.Containers[0].Ports {
		if !slices.ContainsFunc(fgPolicy.Spec.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool { return portIn(r.Ports, p) }) {
			t.Errorf("NetworkPolicy %s does not admit floodgate's port %s", fgPolicy.Name, p.Name)
		}
	}
	redisPort := redis.Spec.Containers[0].Ports[0]
	reaches := func(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, to map[string]string) bool {
		return portIn(ports, redisPort) && slices.ContainsFunc(peers, func(p networkingv1.NetworkPolicyPeer) bool {
			return p.NamespaceSelector == nil && selects(t, p.PodSelector, to)
		})
	}
	if !slices.ContainsFunc(fgPolicy.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool { return reaches(r.To, r.Ports, redis.Labels) }) {
		t.Errorf("NetworkPolicy %s does not let floodgate reach Redis's port", fgPolicy.Name)
	}
	for _, r := range redisPolicy.Spec.Ingress {
		if !reaches(r.From, r.Ports, fg.Labels) {
			t.Errorf("NetworkPolicy %s admits more than floodgate's pods at Redis's port: %+v", redisPolicy.Name, r)
		}
	}
	if len(redisPolicy.Spec.Ingress) == 0 {
		t.Errorf("NetworkPolicy %s admits nothing: floodgate cannot reach Redis", redisPolicy.Name)
	}
}

// policyOf is the NetworkPolicy that selects pods of the labels pod, for
// their ingress and egress both.
func policyOf(t *testing.T, objs map[string]runtime.Object, pod map[string]string) *networkingv1.NetworkPolicy {
	t.Helper()
	for _, obj := range objs {
		np, ok := obj.(*networkingv1.NetworkPolicy)
		if ok && selects(t, &np.Spec.PodSelector, pod) {
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				t.Errorf("NetworkPolicy %s does not isolate both ingress and egress", np.Name)
			}
			return np
		}
	}
	t.Fatalf("no NetworkPolicy selects pods %v", pod)
	return nil
}

// selects reports whether sel selects pods of labels pod.
func selects(t *testing.T, sel *metav1.LabelSelector, pod map[string]string) bool {
	t.Helper()
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return !s.Empty() && s.Matches(labels.Set(pod))
}

// portIn reports whether ports name the container port p, by name or
// number, over TCP.
func portIn(ports []networkingv1.NetworkPolicyPort, p corev1.ContainerPort) bool {
	return slices.ContainsFunc(ports, func(np networkingv1.NetworkPolicyPort) bool {
		tcp := np.Protocol == nil || *np.Protocol == corev1.ProtocolTCP
		return tcp && np.Port != nil && (np.Port.String() == p.Name || np.Port.IntValue() == int(p.ContainerPort))
	})
}
