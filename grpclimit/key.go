package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/frontend"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// A KeyFunc returns the rate-limit key of a call: who is calling. fullMethod
// is the call's method, "/package.Service/Method".
//
// An error refuses the call (see Interceptor): one wrapping ErrNoKey, for
// a call that carries no usable key, with codes.InvalidArgument; any other
// with codes.Internal. As in package httplimit, a key read from metadata is
// only as trustworthy as whatever checked that metadata.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// of is f as the front-end core calls it; nil for a nil f.
func (f KeyFunc) of() func(*call) (string, error) {
	if f == nil {
		return nil
	}
	return func(c *call) (string, error) { return f(c.ctx, c.method) }
}

// ErrNoKey is wrapped by the errors of KeyFuncs for a call that carries no
// usable key. It is httplimit.ErrNoKey.
var ErrNoKey = frontend.ErrNoKey

// ErrNoPeerAddr is returned by the KeyFunc of ByPeer for a call whose peer
// has no IP address (a unix socket, an in-memory connection): key such
// calls on something else.
var ErrNoPeerAddr = errors.New("grpclimit: the peer has no IP address")

// ByPeer returns a KeyFunc keying calls on the client's address, found and
// grouped by c exactly as httplimit.ClientIP does for HTTP (read its
// warning on trusted proxies): the peer's address, or when the peer is in
// c.TrustedProxies, the address that its x-forwarded-for (or forwarded)
// metadata names, read from the right; IPv6 addresses grouped by /64.
// ByPeer(httplimit.ClientIP{}), the default key, believes no metadata.
func ByPeer(c httplimit.ClientIP) KeyFunc {
	mdKey := strings.ToLower(c.Header.String())
	return func(ctx context.Context, _ string) (string, error) {
		a, err := PeerAddr(ctx)
		if err != nil {
			return "", err
		}
		if len(c.TrustedProxies) > 0 {
			md, _ := metadata.FromIncomingContext(ctx)
			a = c.Resolve(a, md.Get(mdKey))
		}
		return c.KeyOf(a), nil
	}
}

// PeerAddr returns the IP address of the peer of the call whose context is
// ctx, unmapped and without zone, or ErrNoPeerAddr.
func PeerAddr(ctx context.Context) (netip.Addr, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, ErrNoPeerAddr
	}
	var a netip.Addr
	switch pa := p.Addr.(type) {
	case *net.TCPAddr:
		a, _ = netip.AddrFromSlice(pa.IP)
	default:
		if ap, err := netip.ParseAddrPort(pa.String()); err == nil {
			a = ap.Addr()
		}
	}
	if !a.IsValid() {
		return netip.Addr{}, ErrNoPeerAddr
	}
	return a.Unmap().WithZone(""), nil
}

// ByMetadata returns a KeyFunc keying calls on the first value of the
// incoming metadata key (such as "x-api-key"; keys are lower case). A call
// without it, or with an empty value or one longer than
// frontend.MaxKeyLen, has no key (ErrNoKey).
func ByMetadata(key string) KeyFunc {
	key = strings.ToLower(key)
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		vs := md.Get(key)
		switch {
		case len(vs) == 0 || vs[0] == "":
			return "", fmt.Errorf("grpclimit: no %s metadata: %w", key, ErrNoKey)
		case len(vs[0]) > frontend.MaxKeyLen:
			return "", fmt.Errorf("grpclimit: %s metadata longer than %d bytes: %w", key, frontend.MaxKeyLen, ErrNoKey)
		}
		return vs[0], nil
	}
}

// ByMethod is a KeyFunc keying calls on their full method: a limit per
// method, shared by all clients.
func ByMethod(_ context.Context, fullMethod string) (string, error) { return fullMethod, nil }

// Global is a KeyFunc giving every call the same key, "*".
func Global(context.Context, string) (string, error) { return "*", nil }

// ByContext returns a KeyFunc keying calls on the value that an earlier
// interceptor stored in the context under key (an authenticated user's
// ID): a string, an integer or a fmt.Stringer, as httplimit.ByContext.
func ByContext(key any) KeyFunc {
	return func(ctx context.Context, _ string) (string, error) {
		return frontend.FromContext("grpclimit", key, ctx.Value(key))
	}
}

// FirstOf returns a KeyFunc trying fns in order, as httplimit.FirstOf: the
// first key found wins, prefixed with its function's index and a colon;
// ErrNoKey passes on to the next function; other errors stop.
func FirstOf(fns ...KeyFunc) KeyFunc {
	fs := make([]func(*call) (string, error), len(fns))
	for i, f := range fns {
		fs[i] = f.of()
	}
	first := frontend.FirstOf("grpclimit", fs)
	return func(ctx context.Context, fullMethod string) (string, error) {
		return first(&call{ctx: ctx, method: fullMethod})
	}
}
