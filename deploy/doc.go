// Package deploy holds floodgate's deployment: the container image's
// builder (package image, command cmd/mkimage, make image) and a
// Dockerfile, Kubernetes manifests (kubernetes/), an Envoy configuration
// (envoy/) and an Istio EnvoyFilter (istio/), a Grafana dashboard
// (grafana/) and Prometheus alert rules (prometheus/). Its tests build the
// image and run floodgate from it, and check every manifest's ports, paths,
// flags and metric names against the floodgate they deploy. They decode the
// Kubernetes manifests strictly into Kubernetes' API types and check each
// pod against the "restricted" Pod Security Standard, the namespace, the
// topology spread and the NetworkPolicies.
//
// It is a module of its own so that the root module, a library, does not
// require go-containerregistry.
package deploy
