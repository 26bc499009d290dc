package server

import (
	"cmp"
	"fmt"
	"net"
)

// listeners are Run's listeners, one per API: all bound before any is
// served, so that a busy address fails the start. grpc is nil without
// Envoy's service, metrics without Options.MetricsAddr.
type listeners struct {
	http, grpc, metrics net.Listener
}

// listen binds the listeners; when one fails, it closes the others.
func (in *instance) listen() (err error) {
	defer func() {
		if err != nil {
			in.lns.close()
		}
	}()
	if in.lns.http, err = in.listenOne("http", cmp.Or(in.o.HTTPAddr, DefaultHTTPAddr)); err != nil {
		return err
	}
	if in.envoy != nil {
		if in.lns.grpc, err = in.listenOne("grpc", cmp.Or(in.o.GRPCAddr, DefaultGRPCAddr)); err != nil {
			return err
		}
	}
	if in.o.MetricsAddr != "" {
		if in.lns.metrics, err = in.listenOne("metrics", in.o.MetricsAddr); err != nil {
			return err
		}
	}
	return nil
}

// listenOne binds the listener of the API name at addr, logs it and tells
// Options.Listening.
func (in *instance) listenOne(name, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	in.log.Info("listening", "api", name, "addr", ln.Addr().String(), "tls", in.cfg.TLSEnabled() && (name != "metrics" || in.cfg.Ops.TLS))
	if in.o.Listening != nil {
		in.o.Listening(name, ln.Addr())
	}
	return ln, nil
}

// close closes the listeners bound, for a start that fails before they
// are served.
func (l listeners) close() {
	for _, ln := range []net.Listener{l.http, l.grpc, l.metrics} {
		if ln != nil {
			ln.Close()
		}
	}
}
