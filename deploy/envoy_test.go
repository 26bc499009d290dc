package deploy_test

import (
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	// The types that the configurations' typed_config name.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// TestEnvoyConfig reads envoy/envoy.yaml as Envoy's bootstrap (with
// go-control-plane's types and validation), and checks that its rate-limit
// filter asks a domain of the envoy ConfigMap from a cluster at the
// Service's gRPC port.
func TestEnvoyConfig(t *testing.T) {
	var boot bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(jsonOf(t, readYAML(t, "envoy/envoy.yaml")[0]), &boot); err != nil {
		t.Fatalf("envoy/envoy.yaml is not Envoy's bootstrap: %v", err)
	}
	if err := boot.ValidateAll(); err != nil {
		t.Fatalf("envoy/envoy.yaml: %v", err)
	}
	var rl ratelimitv3.RateLimit
	for _, l := range boot.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig().UnmarshalTo(&hcm) != nil {
					continue
				}
				for _, hf := range hcm.GetHttpFilters() {
					if hf.GetTypedConfig().UnmarshalTo(&rl) == nil {
						break
					}
				}
			}
		}
	}
	checkRateLimitFilter(t, "envoy/envoy.yaml", &rl)
	cluster := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	for _, c := range boot.GetStaticResources().GetClusters() {
		if c.GetName() != cluster {
			continue
		}
		if c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] == nil {
			t.Errorf("cluster %s does not speak HTTP/2 (gRPC)", cluster)
		}
		sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		checkServiceAddress(t, "envoy/envoy.yaml", sa.GetAddress(), int(sa.GetPortValue()))
		return
	}
	t.Errorf("envoy/envoy.yaml has no cluster %q", cluster)
}

// checkRateLimitFilter checks the filter's domain and transport.
func checkRateLimitFilter(t *testing.T, file string, rl *ratelimitv3.RateLimit) {
	t.Helper()
	if !envoyDomains(t)[rl.GetDomain()] {
		t.Errorf("%s: the rate-limit filter's domain %q is none of the envoy ConfigMap's %v", file, rl.GetDomain(), envoyDomains(t))
	}
	if rl.GetRateLimitService().GetTransportApiVersion().String() != "V3" {
		t.Errorf("%s: the rate-limit service's transport is not V3", file)
	}
}

// checkServiceAddress checks that host:port is the floodgate Service's
// gRPC port.
func checkServiceAddress(t *testing.T, file, host string, port int) {
	t.Helper()
	if host != "floodgate" && !strings.HasPrefix(host, "floodgate.") {
		t.Errorf("%s: floodgate at host %q, not the Service floodgate", file, host)
	}
	if want := wantPorts(t)["grpc"]; port != want {
		t.Errorf("%s: floodgate at port %d, want the gRPC port %d", file, port, want)
	}
}

// TestIstioEnvoyFilter checks the EnvoyFilter's rate-limit filter as Envoy
// would read it, and its cluster against the Service.
func TestIstioEnvoyFilter(t *testing.T) {
	doc := readYAML(t, "istio/envoyfilter.yaml")[0]
	if str(doc, "kind") != "EnvoyFilter" {
		t.Fatalf("istio/envoyfilter.yaml is a %s", str(doc, "kind"))
	}
	for _, p := range list(doc, "spec", "configPatches") {
		if str(p, "applyTo") != "HTTP_FILTER" {
			continue
		}
		var typed anypb.Any
		var rl ratelimitv3.RateLimit
		if err := protojson.Unmarshal(jsonOf(t, dig(p, "patch", "value", "typed_config")), &typed); err != nil {
			t.Fatalf("istio/envoyfilter.yaml: the filter's typed_config: %v", err)
		}
		if err := typed.UnmarshalTo(&rl); err != nil {
			t.Fatalf("istio/envoyfilter.yaml: the filter's typed_config: %v", err)
		}
		if err := rl.ValidateAll(); err != nil {
			t.Fatalf("istio/envoyfilter.yaml: %v", err)
		}
		checkRateLimitFilter(t, "istio/envoyfilter.yaml", &rl)
		// Istio's name of a Service's port: outbound|PORT||HOST.
		parts := strings.Split(rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName(), "|")
		if len(parts) != 4 || parts[0] != "outbound" {
			t.Fatalf("istio/envoyfilter.yaml: cluster %q is not outbound|PORT||HOST", parts)
		}
		port, _ := strconv.Atoi(parts[1])
		checkServiceAddress(t, "istio/envoyfilter.yaml", parts[3], port)
		objs, _ := typedManifests(t)
		svc := objs["Service/floodgate"].(metav1.Object)
		if want := svc.GetName() + "." + svc.GetNamespace() + ".svc.cluster.local"; parts[3] != want {
			t.Errorf("istio/envoyfilter.yaml: cluster host %s, but the manifests make Service %s", parts[3], want)
		}
		return
	}
	t.Errorf("istio/envoyfilter.yaml patches no HTTP filter")
}
