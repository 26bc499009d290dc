package httplimit

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

var proxies = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("2001:db8:ffff::/48"),
}

func TestClientIPAddr(t *testing.T) {
	xff := ClientIP{TrustedProxies: proxies}
	fwd := ClientIP{TrustedProxies: proxies, Header: Forwarded}
	for _, tc := range []struct {
		name   string
		c      ClientIP
		remote string
		header map[string][]string
		want   string
	}{
		// No trusted proxy: the peer, whatever the headers say.
		{"peer", ClientIP{}, "192.0.2.1:1234", nil, "192.0.2.1"},
		{"peer without port", ClientIP{}, "192.0.2.1", nil, "192.0.2.1"},
		{"peer IPv6", ClientIP{}, "[2001:db8::1]:443", nil, "2001:db8::1"},
		{"peer IPv6 zone", ClientIP{}, "[fe80::1%eth0]:443", nil, "fe80::1"},
		{"peer IPv4-mapped", ClientIP{}, "[::ffff:192.0.2.1]:443", nil, "192.0.2.1"},
		{"no proxies: XFF ignored", ClientIP{}, "192.0.2.1:1", h("X-Forwarded-For", "198.51.100.7"), "192.0.2.1"},
		{"no proxies: Forwarded ignored", ClientIP{Header: Forwarded}, "192.0.2.1:1", h("Forwarded", "for=198.51.100.7"), "192.0.2.1"},

		// Spoofed headers from an untrusted peer are ignored.
		{"spoofed XFF from untrusted peer", xff, "192.0.2.1:1", h("X-Forwarded-For", "198.51.100.7"), "192.0.2.1"},
		{"spoofed XFF naming a proxy", xff, "192.0.2.1:1", h("X-Forwarded-For", "10.0.0.1"), "192.0.2.1"},
		{"spoofed Forwarded from untrusted peer", fwd, "192.0.2.1:1", h("Forwarded", "for=198.51.100.7"), "192.0.2.1"},
		{"spoofed IPv6 peer", xff, "[2001:db8::1]:1", h("X-Forwarded-For", "198.51.100.7"), "2001:db8::1"},

		// One trusted proxy.
		{"trusted proxy", xff, "10.0.0.1:1", h("X-Forwarded-For", "198.51.100.7"), "198.51.100.7"},
		{"trusted proxy, no header", xff, "10.0.0.1:1", nil, "10.0.0.1"},
		{"trusted mapped peer", xff, "[::ffff:10.0.0.1]:1", h("X-Forwarded-For", "198.51.100.7"), "198.51.100.7"},
		{"trusted IPv6 proxy", xff, "[2001:db8:ffff::2]:1", h("X-Forwarded-For", "2001:db8:1::5"), "2001:db8:1::5"},
		{"client prepends spoof", xff, "10.0.0.1:1", h("X-Forwarded-For", "203.0.113.9, 198.51.100.7"), "198.51.100.7"},
		{"client prepends many", xff, "10.0.0.1:1", h("X-Forwarded-For", "1.1.1.1,2.2.2.2, 3.3.3.3 ,198.51.100.7"), "198.51.100.7"},
		{"client prepends trusted", xff, "10.0.0.1:1", h("X-Forwarded-For", "10.9.9.9, 198.51.100.7"), "198.51.100.7"},
		{"OWS and tabs", xff, "10.0.0.1:1", h("X-Forwarded-For", " \t198.51.100.7\t "), "198.51.100.7"},

		// Chains through several trusted proxies.
		{"two proxies", xff, "10.0.0.1:1", h("X-Forwarded-For", "198.51.100.7, 10.0.0.2"), "198.51.100.7"},
		{"three proxies and a spoof", xff, "10.0.0.1:1", h("X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.0.0.3, 10.0.0.2"), "198.51.100.7"},
		{"proxies over two fields", xff, "10.0.0.1:1", h("X-Forwarded-For", "6.6.6.6, 198.51.100.7", "10.0.0.3, 10.0.0.2"), "198.51.100.7"},
		{"proxy adds a field", xff, "10.0.0.1:1", h("X-Forwarded-For", "6.6.6.6", "198.51.100.7"), "198.51.100.7"},
		{"all trusted: left-most", xff, "10.0.0.1:1", h("X-Forwarded-For", "10.0.0.4, 10.0.0.3"), "10.0.0.4"},
		{"all trusted over fields", xff, "10.0.0.1:1", h("X-Forwarded-For", "10.0.0.5", "10.0.0.4, 10.0.0.3"), "10.0.0.5"},
		{"mixed families", xff, "10.0.0.1:1", h("X-Forwarded-For", "2001:db8:1::5, 2001:db8:ffff::9"), "2001:db8:1::5"},

		// Ports, brackets, zones, mapped addresses in the header.
		{"IPv4 with port", xff, "10.0.0.1:1", h("X-Forwarded-For", "198.51.100.7:5678"), "198.51.100.7"},
		{"IPv6 bare", xff, "10.0.0.1:1", h("X-Forwarded-For", "2001:db8:1::5"), "2001:db8:1::5"},
		{"IPv6 brackets", xff, "10.0.0.1:1", h("X-Forwarded-For", "[2001:db8:1::5]"), "2001:db8:1::5"},
		{"IPv6 brackets port", xff, "10.0.0.1:1", h("X-Forwarded-For", "[2001:db8:1::5]:443"), "2001:db8:1::5"},
		{"IPv6 zone", xff, "10.0.0.1:1", h("X-Forwarded-For", "fe80::1%eth0"), "fe80::1"},
		{"IPv4-mapped", xff, "10.0.0.1:1", h("X-Forwarded-For", "::ffff:198.51.100.7"), "198.51.100.7"},
		{"IPv4-mapped proxy", xff, "10.0.0.1:1", h("X-Forwarded-For", "198.51.100.7, ::ffff:10.0.0.2"), "198.51.100.7"},

		// Malformed: the peer, never a value to the left.
		{"garbage", xff, "10.0.0.1:1", h("X-Forwarded-For", "not-an-ip"), "10.0.0.1"},
		{"garbage right of spoof", xff, "10.0.0.1:1", h("X-Forwarded-For", "198.51.100.7, garbage"), "10.0.0.1"},
		{"garbage left of client", xff, "10.0.0.1:1", h("X-Forwarded-For", "garbage, 198.51.100.7"), "198.51.100.7"},
		{"empty element", xff, "10.0.0.1:1", h("X-Forwarded-For", "198.51.100.7, , 10.0.0.2"), "10.0.0.1"},
		{"trailing comma", xff, "10.0.0.1:1", h("X-Forwarded-For", "198.51.100.7,"), "10.0.0.1"},
		{"empty field", xff, "10.0.0.1:1", h("X-Forwarded-For", "6.6.6.6", ""), "10.0.0.1"},
		{"unknown", xff, "10.0.0.1:1", h("X-Forwarded-For", "6.6.6.6, unknown"), "10.0.0.1"},
		{"bad port", xff, "10.0.0.1:1", h("X-Forwarded-For", "198.51.100.7:99999"), "10.0.0.1"},
		{"IPv6 with bare port", xff, "10.0.0.1:1", h("X-Forwarded-For", "2001:db8::1:443:x"), "10.0.0.1"},
		{"IPv4 in brackets", xff, "10.0.0.1:1", h("X-Forwarded-For", "[198.51.100.7]"), "10.0.0.1"},
		{"unclosed bracket", xff, "10.0.0.1:1", h("X-Forwarded-For", "[2001:db8::1"), "10.0.0.1"},
		{"leading zeros", xff, "10.0.0.1:1", h("X-Forwarded-For", "198.051.100.7"), "10.0.0.1"},
		{"hostname", xff, "10.0.0.1:1", h("X-Forwarded-For", "example.com"), "10.0.0.1"},
		{"Forwarded header when XFF configured", xff, "10.0.0.1:1", h("Forwarded", "for=198.51.100.7"), "10.0.0.1"},
		{"XFF header when Forwarded configured", fwd, "10.0.0.1:1", h("X-Forwarded-For", "198.51.100.7"), "10.0.0.1"},

		// Forwarded, RFC 7239.
		{"fwd", fwd, "10.0.0.1:1", h("Forwarded", "for=198.51.100.7"), "198.51.100.7"},
		{"fwd params", fwd, "10.0.0.1:1", h("Forwarded", "for=198.51.100.7;proto=https;by=10.0.0.1"), "198.51.100.7"},
		{"fwd case and OWS", fwd, "10.0.0.1:1", h("Forwarded", "Proto=http; FOR=198.51.100.7"), "198.51.100.7"},
		{"fwd quoted IPv6 port", fwd, "10.0.0.1:1", h("Forwarded", `for="[2001:db8:cafe::17]:4711"`), "2001:db8:cafe::17"},
		{"fwd quoted IPv4", fwd, "10.0.0.1:1", h("Forwarded", `for="198.51.100.7:80"`), "198.51.100.7"},
		{"fwd quoted pair", fwd, "10.0.0.1:1", h("Forwarded", `for="198.51.100.7", for="10.0.0.2";x="a\"b,c"`), "198.51.100.7"},
		{"fwd chain", fwd, "10.0.0.1:1", h("Forwarded", "for=6.6.6.6, for=198.51.100.7, for=10.0.0.2"), "198.51.100.7"},
		{"fwd chain over fields", fwd, "10.0.0.1:1", h("Forwarded", "for=6.6.6.6, for=198.51.100.7", "for=10.0.0.2"), "198.51.100.7"},
		{"fwd obfuscated port", fwd, "10.0.0.1:1", h("Forwarded", `for="198.51.100.7:_p1"`), "198.51.100.7"},
		{"fwd unknown", fwd, "10.0.0.1:1", h("Forwarded", "for=6.6.6.6, for=unknown"), "10.0.0.1"},
		{"fwd obfuscated node", fwd, "10.0.0.1:1", h("Forwarded", "for=6.6.6.6, for=_hidden"), "10.0.0.1"},
		{"fwd unquoted IPv6", fwd, "10.0.0.1:1", h("Forwarded", "for=[2001:db8::1]"), "10.0.0.1"},
		{"fwd no for", fwd, "10.0.0.1:1", h("Forwarded", "for=6.6.6.6, proto=https"), "10.0.0.1"},
		{"fwd two fors", fwd, "10.0.0.1:1", h("Forwarded", "for=198.51.100.7;for=6.6.6.6"), "10.0.0.1"},
		{"fwd unterminated quote", fwd, "10.0.0.1:1", h("Forwarded", `for="6.6.6.6, for=198.51.100.7`), "10.0.0.1"},
		{"fwd spoof swallows proxy's element", fwd, "10.0.0.1:1", h("Forwarded", `for=6.6.6.6;x=", for="[2001:db8::1]"`), "10.0.0.1"},
		{"fwd empty element", fwd, "10.0.0.1:1", h("Forwarded", "for=198.51.100.7,,for=10.0.0.2"), "10.0.0.1"},
		{"fwd garbage left of client field", fwd, "10.0.0.1:1", h("Forwarded", `for="6.6.6.6`, "for=198.51.100.7"), "198.51.100.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.remote, Header: tc.header}
			if r.Header == nil {
				r.Header = http.Header{}
			}
			a, err := tc.c.Addr(r)
			if err != nil {
				t.Fatal(err)
			}
			if a.String() != tc.want {
				t.Errorf("Addr = %v, want %v", a, tc.want)
			}
		})
	}
}

// h returns a header with name's fields set to values, as received.
func h(name string, values ...string) http.Header {
	return http.Header{http.CanonicalHeaderKey(name): values}
}

func TestClientIPNoAddr(t *testing.T) {
	for _, remote := range []string{"", "@", "/run/app.sock", "pipe"} {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{}}
		if _, err := (ClientIP{}).Key(r); !errors.Is(err, ErrNoClientAddr) {
			t.Errorf("RemoteAddr %q: err = %v, want ErrNoClientAddr", remote, err)
		}
		if errors.Is(ErrNoClientAddr, ErrNoKey) {
			t.Error("ErrNoClientAddr wraps ErrNoKey: it would be answered 400")
		}
	}
}

func TestClientIPKeyGrouping(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    ClientIP
		addr string
		want string
	}{
		{"IPv4 default /32", ClientIP{}, "192.0.2.77", "192.0.2.77"},
		{"IPv4 /24", ClientIP{IPv4Bits: 24}, "192.0.2.77", "192.0.2.0/24"},
		{"IPv4 above 32", ClientIP{IPv4Bits: 40}, "192.0.2.77", "192.0.2.77"},
		{"IPv4 negative", ClientIP{IPv4Bits: -1}, "192.0.2.77", "0.0.0.0/0"},
		{"IPv6 default /64", ClientIP{}, "2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"},
		{"IPv6 same /64", ClientIP{}, "2001:db8:1:2::1", "2001:db8:1:2::/64"},
		{"IPv6 /56", ClientIP{IPv6Bits: 56}, "2001:db8:1:2ff::1", "2001:db8:1:200::/56"},
		{"IPv6 /128", ClientIP{IPv6Bits: 128}, "2001:db8::1", "2001:db8::1"},
		{"IPv6 above 128", ClientIP{IPv6Bits: 200}, "2001:db8::1", "2001:db8::1"},
		{"IPv6 zone dropped", ClientIP{}, "fe80::1:2:3:4%eth0", "fe80::/64"},
		{"IPv4-mapped is IPv4", ClientIP{}, "::ffff:192.0.2.77", "192.0.2.77"},
		{"IPv4-mapped /24", ClientIP{IPv4Bits: 24, IPv6Bits: 32}, "::ffff:192.0.2.77", "192.0.2.0/24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.KeyOf(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Errorf("KeyOf(%s) = %q, want %q", tc.addr, got, tc.want)
			}
		})
	}
	if k := (ClientIP{}).KeyOf(netip.Addr{}); k != "" {
		t.Errorf("KeyOf(invalid) = %q", k)
	}
}

func TestClientIPIn(t *testing.T) {
	in := ClientIP{TrustedProxies: proxies}.In(netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("::ffff:203.0.113.0/120"))
	for _, tc := range []struct {
		remote, xff string
		want        bool
	}{
		{"192.0.2.9:1", "", true},
		{"198.51.100.1:1", "", false},
		{"203.0.113.5:1", "", true},
		{"10.0.0.1:1", "192.0.2.9", true},
		{"198.51.100.1:1", "192.0.2.9", false}, // spoofed
		{"@", "", false},
	} {
		r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := in(r); got != tc.want {
			t.Errorf("In(%s, XFF %q) = %v, want %v", tc.remote, tc.xff, got, tc.want)
		}
	}
}

func TestParseForwarded(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the for= values joined by |, or "!" when malformed
	}{
		{"for=a", "a"},
		{`for="a b"`, "a b"},
		{`for="a\\b\"c"`, `a\b"c`},
		{"for=a;by=b, for=c", "a|c"},
		{"for=a ,for=c", "a|c"},
		{"by=b;for=a", "a"},
		{"", "!"},
		{" ", "!"},
		{"for", "!"},
		{"for=", "!"},
		{"=a", "!"},
		{"for=a;", "!"},
		{"for=a,", "!"},
		{"for=a;;by=b", "!"},
		{`for="a`, "!"},
		{`for="a\`, "!"},
		{"for=a b", "!"},
		{"for=\"a\x01\"", "!"},
		{"by=b", "!"},
		{"for=a;for=b", "!"},
	} {
		fors, ok := parseForwarded(tc.in)
		got := strings.Join(fors, "|")
		if !ok {
			got = "!"
		}
		if got != tc.want {
			t.Errorf("parseForwarded(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// fuzzProxies is a set of trusted proxies for the fuzz tests, with an
// IPv4-mapped prefix among them.
var fuzzProxies = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("2001:db8:ffff::/48"),
	netip.MustParsePrefix("::ffff:172.16.0.0/108"),
}

// checkResolved checks the properties every resolution has: a valid,
// unmapped address without zone; the peer itself when the peer is not
// trusted; and, since a client controls the left of the header, the same
// answer (or the peer, for a Forwarded field that no longer parses) with
// anything prepended to the first field when the answer came from the
// header and is not a trusted address.
func checkResolved(t *testing.T, c ClientIP, peer netip.Addr, fields []string, junk string) {
	got := c.Resolve(peer, fields)
	np := normalize(peer)
	if !got.IsValid() || got.Is4In6() || got.Zone() != "" {
		t.Fatalf("Resolve(%v, %q) = %v: not a valid normalized address", peer, fields, got)
	}
	if !c.trusted(np) && got != np {
		t.Fatalf("Resolve(%v, %q) = %v from an untrusted peer, want the peer", peer, fields, got)
	}
	if len(fields) == 0 || got == np || c.trusted(got) || strings.ContainsAny(junk, "\r\n") {
		return
	}
	spoofed := append([]string{junk + "," + fields[0]}, fields[1:]...)
	again := c.Resolve(peer, spoofed)
	if again != got && !(c.Header == Forwarded && again == np) {
		t.Fatalf("Resolve(%v, %q) = %v but with %q prepended = %v", peer, fields, got, junk, again)
	}
}

func FuzzResolveXFF(f *testing.F) {
	f.Add("10.0.0.1", "198.51.100.7", "", "6.6.6.6")
	f.Add("10.0.0.1", "198.51.100.7, 10.0.0.2", "10.0.0.3", "1.1.1.1")
	f.Add("::ffff:10.0.0.1", "[2001:db8::1]:80, ::ffff:172.16.0.1", "", "x")
	f.Add("192.0.2.1", "198.51.100.7", "", "")
	f.Add("10.1.1.1", "fe80::1%eth0, 10.0.0.1", "2001:db8:ffff::1", "[")
	f.Add("2001:db8:ffff::2", "unknown, 198.51.100.7:65535", "", ",,")
	f.Fuzz(func(t *testing.T, peerS, f1, f2, junk string) {
		peer, err := netip.ParseAddr(peerS)
		if err != nil {
			return
		}
		c := ClientIP{TrustedProxies: fuzzProxies}
		fields := []string{f1}
		if f2 != "" {
			fields = append(fields, f2)
		}
		checkResolved(t, c, peer, fields, junk)
	})
}

func FuzzResolveForwarded(f *testing.F) {
	f.Add("10.0.0.1", "for=198.51.100.7", "", `for="6.6.6.6`)
	f.Add("10.0.0.1", `for="[2001:db8::1]:4711";proto=https, for=10.0.0.2`, "for=10.0.0.3", "for=1.1.1.1")
	f.Add("10.0.0.1", `for=6.6.6.6;x="a\"b,c", for=unknown`, "", `x="`)
	f.Add("192.0.2.1", "for=198.51.100.7", "", "")
	f.Add("10.0.0.1", "for=_hidden;by=_x", `for="198.51.100.7:_p"`, ";")
	f.Fuzz(func(t *testing.T, peerS, f1, f2, junk string) {
		peer, err := netip.ParseAddr(peerS)
		if err != nil {
			return
		}
		c := ClientIP{TrustedProxies: fuzzProxies, Header: Forwarded}
		fields := []string{f1}
		if f2 != "" {
			fields = append(fields, f2)
		}
		checkResolved(t, c, peer, fields, junk)
	})
}

// FuzzParseNode checks that parseNode never panics and returns only
// valid, normalized addresses, and that whatever it accepts is a form of
// the address it returns.
func FuzzParseNode(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]:443",
		"fe80::1%eth0", "::ffff:1.2.3.4", "[::ffff:1.2.3.4]:_x", "unknown", "[", "1.2.3.4:", ":80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseNode(s)
		if !ok {
			return
		}
		if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
			t.Fatalf("parseNode(%q) = %v", s, a)
		}
	})
}

// FuzzKeyFastPath checks that the allocation-free path of ClientIP.Key
// (a direct IPv4 peer) keys exactly as the general one.
func FuzzKeyFastPath(f *testing.F) {
	for _, s := range []string{"192.0.2.1:80", "192.0.2.1:_x", "192.0.2.1:", "192.0.2.1:99999", "1.2.3.4:0080",
		"[::ffff:1.2.3.4]:1", "01.2.3.4:1", "1.2.3.4", "[2001:db8::1]:1", ":1", "1.2.3.4:1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, remote string) {
		host, fast := ipv4Host(remote)
		a, ok := parseRemoteAddr(remote)
		switch {
		case fast && !ok:
			t.Fatalf("fast path keys %q as %q, the general path finds no address", remote, host)
		case fast && host != (ClientIP{}).KeyOf(a):
			t.Fatalf("fast path keys %q as %q, the general path as %q", remote, host, (ClientIP{}).KeyOf(a))
		}
	})
}
