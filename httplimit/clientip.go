package httplimit

import (
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// ProxyHeader names the header in which trusted proxies pass on the address
// of the client they received a request from.
type ProxyHeader uint8

const (
	// XForwardedFor is X-Forwarded-For: a comma-separated list of
	// addresses, each proxy appending the address of its own peer. nginx
	// ($proxy_add_x_forwarded_for), HAProxy (option forwardfor), Envoy and
	// the cloud load balancers write it.
	XForwardedFor ProxyHeader = iota
	// Forwarded is RFC 7239's Forwarded: a list of elements such as
	// for=192.0.2.60;proto=https, for="[2001:db8::17]:4711".
	Forwarded
)

// String returns the header's name.
func (h ProxyHeader) String() string {
	switch h {
	case XForwardedFor:
		return "X-Forwarded-For"
	case Forwarded:
		return "Forwarded"
	}
	return "ProxyHeader(" + strconv.Itoa(int(h)) + ")"
}

// ErrNoClientAddr is returned by ClientIP.Addr and ClientIP.Key when the
// request's RemoteAddr is not an IP address, as for a server listening on
// a unix socket: key such requests on something else. It does not wrap
// ErrNoKey: the middleware answers it with 500, since the fault is the
// server's configuration, not the request.
var ErrNoClientAddr = errors.New("httplimit: RemoteAddr is not an IP address")

// ClientIP says how to find the address of the client that sent a request
// and how to group addresses into rate-limit keys. Its zero value keys on
// the direct peer (the request's RemoteAddr), each IPv4 address on its own
// and IPv6 addresses by /64, and believes no header: right for a server
// that clients reach directly.
//
// # Behind a reverse proxy
//
// Behind a proxy or load balancer the peer is the proxy, so every client
// would share one key. The proxy passes the client's address on in a
// header, X-Forwarded-For or Forwarded, but a client can send that header
// too, with any address in it: believed blindly, it lets a client take a
// fresh key on every request (and so never be limited), or spend another
// client's quota. ClientIP therefore reads the header only when the peer
// is one of TrustedProxies, and then walks it from the right, past the
// addresses of trusted proxies, to the first address that is not one: the
// address that the outermost trusted proxy saw connect to it. Addresses
// further left were written by the client or by proxies you do not
// control, and are never read. When every address in the header is a
// trusted proxy's, the client is the left-most of them.
//
// The walk gives up, and the key is the peer's address, whenever it meets
// anything it cannot read as an address (an empty element, "unknown", an
// obfuscated identifier, a malformed Forwarded element): never a value
// further left, which the client may have chosen. Set Header to the header
// your proxies write, and make sure they append to it (or replace it)
// rather than pass a client's copy on unchanged; a header your proxies do
// not manage is the client's to write.
//
// Addresses are read in any of the forms proxies use: 192.0.2.1,
// 192.0.2.1:443, 2001:db8::1, [2001:db8::1], [2001:db8::1]:443. An
// IPv4-mapped IPv6 address (::ffff:192.0.2.1) is the IPv4 address, and an
// IPv6 zone (%eth0) is dropped.
//
// # Grouping
//
// An IPv6 client usually holds a whole /64 (SLAAC, privacy addresses) and
// can change its address within it at will, so by default the key of an
// IPv6 address is its /64 prefix. IPv6Bits and IPv4Bits set other prefix
// lengths, such as 56 for residential ISPs that delegate /56s, or 24 to
// group an IPv4 /24.
//
// A ClientIP is a value: copy it freely. Its methods are safe for
// concurrent use as long as nobody modifies TrustedProxies meanwhile.
type ClientIP struct {
	// TrustedProxies are the networks of your own proxies, such as
	// 10.0.0.0/8 or the load balancer's subnet. Only a peer in one of them
	// may say, in Header, who the client is. An IPv4-mapped IPv6 prefix
	// (::ffff:10.0.0.0/104) is its IPv4 prefix.
	TrustedProxies []netip.Prefix
	// Header is the header the trusted proxies write: XForwardedFor, the
	// zero value, or Forwarded. It is ignored when TrustedProxies is empty.
	Header ProxyHeader
	// IPv4Bits is the prefix length by which IPv4 addresses are grouped
	// into keys: 0 means 32 (each address its own key). Values above 32
	// mean 32, negative ones 0.
	IPv4Bits int
	// IPv6Bits is the prefix length by which IPv6 addresses are grouped
	// into keys: 0 means 64. Values above 128 mean 128, negative ones 0.
	IPv6Bits int
}

// Addr returns the address of the client that sent r, as the ClientIP doc
// describes: the peer's (RemoteAddr), or when the peer is a trusted proxy,
// the one its header names. It fails with ErrNoClientAddr when RemoteAddr
// is not an IP address.
func (c ClientIP) Addr(r *http.Request) (netip.Addr, error) {
	peer, ok := parseRemoteAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, ErrNoClientAddr
	}
	if len(c.TrustedProxies) == 0 {
		return peer, nil
	}
	return c.Resolve(peer, r.Header.Values(c.Header.String())), nil
}

// Resolve returns the client's address given the peer's address and the
// values of the header fields named by c.Header, in the order received
// (http.Header.Values, or gRPC metadata): the peer, unless it is a trusted
// proxy and the header names another address, as the ClientIP doc
// describes. The result is unmapped and has no zone. It never fails: what
// it cannot read, it ignores in favour of the peer.
func (c ClientIP) Resolve(peer netip.Addr, fields []string) netip.Addr {
	peer = normalize(peer)
	if len(fields) == 0 || !c.trusted(peer) {
		return peer
	}
	var client netip.Addr // the left-most trusted address met so far
	for i := len(fields) - 1; i >= 0; i-- {
		var a netip.Addr
		var done, ok bool
		if c.Header == Forwarded {
			a, done, ok = c.walkForwarded(fields[i])
		} else {
			a, done, ok = c.walkXFF(fields[i])
		}
		switch {
		case !ok:
			return peer
		case done:
			return a
		}
		client = a
	}
	return client
}

// walkXFF walks one X-Forwarded-For field from the right. It returns the
// first address that is not a trusted proxy's with done set; or, when all
// are trusted, the left-most with done unset; ok is false when the walk
// met something that is not an address, an empty element included.
func (c ClientIP) walkXFF(field string) (a netip.Addr, done, ok bool) {
	rest := field
	for {
		elem := rest
		i := strings.LastIndexByte(rest, ',')
		if i >= 0 {
			elem, rest = rest[i+1:], rest[:i]
		}
		a, ok = parseNode(trimOWS(elem))
		if !ok {
			return netip.Addr{}, false, false
		}
		if !c.trusted(a) {
			return a, true, true
		}
		if i < 0 {
			return a, false, true
		}
	}
}

// walkForwarded is walkXFF for one Forwarded field, whose elements must
// all parse (a quoted string may hold a comma, so the field is read from
// the left), and each of which must have one for= parameter.
func (c ClientIP) walkForwarded(field string) (a netip.Addr, done, ok bool) {
	fors, ok := parseForwarded(field)
	if !ok {
		return netip.Addr{}, false, false
	}
	for j := len(fors) - 1; j >= 0; j-- {
		a, ok = parseNode(fors[j])
		if !ok {
			return netip.Addr{}, false, false
		}
		if !c.trusted(a) {
			return a, true, true
		}
	}
	return a, false, true
}

// trusted reports whether a is in one of c.TrustedProxies.
func (c ClientIP) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if prefixContains(p, a) {
			return true
		}
	}
	return false
}

// prefixContains is p.Contains(a) with a normalized and an IPv4-mapped p
// taken as its IPv4 prefix.
func prefixContains(p netip.Prefix, a netip.Addr) bool {
	if pa := p.Addr(); pa.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(pa.Unmap(), p.Bits()-96)
	}
	return p.Contains(a)
}

// Group returns the prefix of a's group: a itself (a /32 or /128) unless
// IPv4Bits or IPv6Bits say otherwise; for IPv6, a's /64 by default.
func (c ClientIP) Group(a netip.Addr) netip.Prefix {
	a = normalize(a)
	p, _ := a.Prefix(c.bits(a))
	return p
}

func (c ClientIP) bits(a netip.Addr) int {
	if a.Is4() {
		switch {
		case c.IPv4Bits == 0 || c.IPv4Bits > 32:
			return 32
		case c.IPv4Bits < 0:
			return 0
		}
		return c.IPv4Bits
	}
	switch {
	case c.IPv6Bits == 0:
		return 64
	case c.IPv6Bits > 128:
		return 128
	case c.IPv6Bits < 0:
		return 0
	}
	return c.IPv6Bits
}

// KeyOf returns the rate-limit key of address a: its group, written as the
// address alone when the group is one address ("192.0.2.1") and as a
// prefix otherwise ("2001:db8:0:1::/64"). An invalid a has the key "".
func (c ClientIP) KeyOf(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	p := c.Group(a)
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// Key is a KeyFunc: the key of r's client address (KeyOf of Addr). It
// fails only with ErrNoClientAddr.
func (c ClientIP) Key(r *http.Request) (string, error) {
	if len(c.TrustedProxies) == 0 && (c.IPv4Bits == 0 || c.IPv4Bits >= 32) {
		// The most common case, a direct IPv4 peer keyed alone, without
		// allocating: the key is RemoteAddr's host, already canonical.
		if host, ok := ipv4Host(r.RemoteAddr); ok {
			return host, nil
		}
	}
	a, err := c.Addr(r)
	if err != nil {
		return "", err
	}
	return c.KeyOf(a), nil
}

// In returns a function reporting whether a request's client address (by
// c) is in one of prefixes, for WithSkip: requests from your own
// monitoring, say. A request whose RemoteAddr is not an IP address is in
// none.
func (c ClientIP) In(prefixes ...netip.Prefix) func(*http.Request) bool {
	prefixes = append([]netip.Prefix(nil), prefixes...)
	return func(r *http.Request) bool {
		a, err := c.Addr(r)
		if err != nil {
			return false
		}
		for _, p := range prefixes {
			if prefixContains(p, a) {
				return true
			}
		}
		return false
	}
}

// normalize unmaps an IPv4-mapped address and drops a zone.
func normalize(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// ipv4Host returns the host of s, "a.b.c.d:port", if s is of that form.
// The IPv4 parser of netip accepts only the canonical form (no leading
// zeros, four parts), so the host is also what KeyOf would return.
func ipv4Host(s string) (string, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 || !validPort(s[i+1:]) || s[i+1] == '_' {
		return "", false
	}
	a, err := netip.ParseAddr(s[:i])
	if err != nil || !a.Is4() {
		return "", false
	}
	return s[:i], true
}

// parseRemoteAddr parses http.Request.RemoteAddr: "ip:port" as net/http
// sets it, or a bare address as some frameworks and tests do.
func parseRemoteAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	return netip.Addr{}, false
}

// parseNode parses one address as proxies write it in X-Forwarded-For or
// in a Forwarded for= value: 192.0.2.1, 192.0.2.1:80, 2001:db8::1,
// [2001:db8::1], [2001:db8::1]:80, with an optional IPv6 zone. A port may
// be RFC 7239's obfuscated form (_abc).
func parseNode(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, false
		}
		return normalize(a), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	// An IPv4 address with a port: a single colon.
	i := strings.IndexByte(s, ':')
	if i < 0 || strings.IndexByte(s[i+1:], ':') >= 0 || !validPort(s[i+1:]) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s[:i])
	if err != nil || !a.Is4() {
		return netip.Addr{}, false
	}
	return a, true
}

// validPort reports whether s is a port: 1 to 5 digits up to 65535, or an
// obfuscated port, "_" and letters, digits, ".", "_" or "-".
func validPort(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '_' {
		for i := 1; i < len(s); i++ {
			if !isObfChar(s[i]) {
				return false
			}
		}
		return len(s) > 1
	}
	if len(s) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n <= 65535
}

func isObfChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-'
}

// trimOWS trims HTTP's optional whitespace, spaces and tabs.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseForwarded parses one Forwarded field (RFC 7239 section 4) and
// returns each element's for= value, unquoted, in order. It fails on any
// syntax error, on an element without exactly one for= parameter, and on
// an empty element: a proxy that writes the header always says whom it
// forwards for.
func parseForwarded(s string) (fors []string, ok bool) {
	p := fwdParser{s: s}
	for {
		p.ows()
		var forVal string
		var haveFor bool
		for {
			name := p.token()
			if name == "" || !p.consume('=') {
				return nil, false
			}
			val, ok := p.value()
			if !ok {
				return nil, false
			}
			if strings.EqualFold(name, "for") {
				if haveFor {
					return nil, false
				}
				forVal, haveFor = val, true
			}
			p.ows()
			if !p.consume(';') {
				break
			}
			p.ows()
		}
		if !haveFor {
			return nil, false
		}
		fors = append(fors, forVal)
		if p.i == len(p.s) {
			return fors, true
		}
		if !p.consume(',') {
			return nil, false
		}
	}
}

// fwdParser reads a Forwarded field.
type fwdParser struct {
	s string
	i int
}

func (p *fwdParser) ows() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *fwdParser) consume(b byte) bool {
	if p.i < len(p.s) && p.s[p.i] == b {
		p.i++
		return true
	}
	return false
}

func (p *fwdParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// value reads a token or a quoted string, unquoted.
func (p *fwdParser) value() (string, bool) {
	if !p.consume('"') {
		v := p.token()
		return v, v != ""
	}
	start := p.i
	var b []byte // set only when the string holds a quoted pair
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			if b != nil {
				return string(b), true
			}
			return p.s[start : p.i-1], true
		case c == '\\':
			if p.i+1 >= len(p.s) || !isQdtextOrVchar(p.s[p.i+1]) {
				return "", false
			}
			if b == nil {
				b = append([]byte(nil), p.s[start:p.i]...)
			}
			b = append(b, p.s[p.i+1])
			p.i += 2
		case isQdtextOrVchar(c) || c == ' ' || c == '\t':
			if b != nil {
				b = append(b, c)
			}
			p.i++
		default:
			return "", false
		}
	}
	return "", false // unterminated
}

// isTchar reports whether b may appear in an RFC 9110 token.
func isTchar(b byte) bool {
	if b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

// isQdtextOrVchar reports whether b is a visible character or obs-text,
// other than none: the characters allowed in a quoted string besides
// whitespace, with '"' and '\' handled by the caller.
func isQdtextOrVchar(b byte) bool {
	return b >= 0x21 && b != 0x7f
}
