// Package gubernator measures Gubernator (github.com/mailgun/gubernator/v2)
// as a peer of floodgate's service, in the service scenarios of the bench
// module (BenchmarkService there), with the same harness and names, so
// that make bench compares them in one run.
//
// It is a module of its own because Gubernator cannot build beside
// floodgate: its tracing library (mailgun/holster) needs an
// OpenTelemetry older than the one gRPC requires. Keep service_test.go's
// harness in step with bench/service_test.go.
package gubernator
