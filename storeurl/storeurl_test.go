package storeurl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storeurl"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestBadURLs(t *testing.T) {
	for _, raw := range []string{
		"", "memory:x", "mem", "file", "http://localhost", "redis://host:port:extra/0?x=%zz",
		"redis://localhost/notanumber", "redis-cluster://", "redis-cluster://a", "redis-cluster://a:1,b",
		"redis-cluster://a:99999", "redis-cluster://a:1/3", "redis-cluster://a:1?bogus=1",
		"redis-sentinel://a:1", "redis-sentinel://m@a:1/x", "redis-sentinel://m@", "redis-cluster://a:1?%zz",
		"file:", "file://", "file:///", "file://host/x.db", "file://relative.db", "file:///x.db?q=1", "file:///x%zz.db",
		"file://u@localhost/x.db", "file:///x.db#f",
	} {
		s, c, err := storeurl.Open(raw)
		if err == nil {
			c.Close()
			t.Errorf("%q: opened %T", raw, s)
			continue
		}
		if !errors.Is(err, storeurl.ErrInvalidURL) {
			t.Errorf("%q: %v does not wrap ErrInvalidURL", raw, err)
		}
		if !strings.Contains(err.Error(), raw) {
			t.Errorf("%q: error %q does not name the URL", raw, err)
		}
	}
}

func TestForms(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // for the relative file paths

	for _, c := range []struct{ raw, store, prefix string }{
		{"memory", "*memstore.Store", ""},
		{"redis://localhost:6379/2", "*redisstore.Store", "floodgate:"},
		{"rediss://u:p@localhost:6379/0?prefix=app:&dial_timeout=1s", "*redisstore.Store", "app:"},
		{"unix:///run/redis.sock?db=1&prefix=x:", "*redisstore.Store", "x:"},
		{"redis-cluster://a:7000,b:7001,c:7002?prefix={fg}:", "*redisstore.Store", "{fg}:"},
		{"redis-cluster://user:pa%40ss@a:7000", "*redisstore.Store", "floodgate:"},
		{"redis-sentinel://mymaster@a:26379,b:26379/3", "*redisstore.Store", "floodgate:"},
		{"redis-sentinel://u:p@mymaster@a:26379", "*redisstore.Store", "floodgate:"},
		{"file:state.db", "*filestore.Store", "state.db"},
		{"file:sub dir/../a%20b.db", "*filestore.Store", "sub dir/../a%20b.db"},
		{"file:" + filepath.Join(dir, "abs.db"), "*filestore.Store", filepath.Join(dir, "abs.db")},
		{"file://" + filepath.ToSlash(filepath.Join(dir, "url.db")), "*filestore.Store", filepath.Join(dir, "url.db")},
		{"file://localhost" + filepath.ToSlash(filepath.Join(dir, "a%20b.db")), "*filestore.Store", filepath.Join(dir, "a b.db")},
	} {
		if strings.Contains(c.prefix, "sub dir") {
			os.Mkdir("sub dir", 0o777)
		}
		s, closer, err := storeurl.Open(c.raw)
		if err != nil {
			t.Errorf("%q: %v", c.raw, err)
			continue
		}
		if got := typeName(s); got != c.store {
			t.Errorf("%q: %s, want %s", c.raw, got, c.store)
		}
		if fs, ok := s.(*filestore.Store); ok {
			// c.prefix is the file's path.
			if fs.Path() != c.prefix {
				t.Errorf("%q: path %q, want %q", c.raw, fs.Path(), c.prefix)
			}
			if _, err := os.Stat(c.prefix); err != nil {
				t.Errorf("%q: %v", c.raw, err)
			}
		}
		if rs, ok := s.(*redisstore.Store); ok {
			// The key layout of redisstore.Store.Table: PREFIX + NAME + ":" + K.
			if sent, want := sentArgs(t, rs), c.prefix+"token-bucket 1/1s:k"; !slices.Contains(sent, want) {
				t.Errorf("%q: sent %q, want the key %q", c.raw, sent, want)
			}
		}
		closer.Close()
	}
}

// sentArgs returns the arguments of the commands s gives its client for a
// decision on key "k" of the limiter named "n", which the client never
// sends: no server need be there.
func sentArgs(t *testing.T, s *redisstore.Store) []string {
	t.Helper()
	h := &catchHook{}
	s.Client().AddHook(h)
	// The policy's own name: a table of another name would first read
	// its name's policies, which the hook fails.
	tb, err := s.Table("token-bucket 1/1s", algo.MustParsePolicy("token-bucket 1/1s"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Decide(context.Background(), "k", time.Now().UnixNano(), 1); !errors.Is(err, errNotSent) {
		t.Errorf("Decide through a client that sends nothing: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.args
}

var errNotSent = errors.New("not sent")

// A catchHook records the string arguments of every command and fails it
// with errNotSent instead of sending it.
type catchHook struct {
	mu   sync.Mutex
	args []string
}

func (h *catchHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *catchHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		h.catch(cmd)
		return errNotSent
	}
}

func (h *catchHook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.catch(cmd)
		}
		return errNotSent
	}
}

func (h *catchHook) catch(cmd redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok {
			h.args = append(h.args, s)
		}
	}
	cmd.SetErr(errNotSent)
}

func typeName(s store.Store) string {
	switch s.(type) {
	case *memstore.Store:
		return "*memstore.Store"
	case *redisstore.Store:
		return "*redisstore.Store"
	case *filestore.Store:
		return "*filestore.Store"
	}
	return "?"
}

// The URLs reach real servers: one on a unix socket, and a cluster.
func TestRealServers(t *testing.T) {
	srv := redistest.SharedServer(t)
	urls := []string{srv.URL() + "?prefix=storeurl-test:"}
	if cl := redistest.SharedCluster(t); cl != nil {
		urls = append(urls, "redis-cluster://"+strings.Join(cl.Addrs(), ",")+"?prefix=storeurl-test:")
	}
	urls = append(urls, "file:"+filepath.Join(t.TempDir(), "state.db"))
	for _, raw := range urls {
		s, closer, err := storeurl.Open(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1h"), floodgate.WithStore(s)))
		for i, want := range []bool{true, true, false} {
			d, err := l.Allow(context.Background(), raw)
			if err != nil || d.Allowed != want {
				t.Errorf("%q: call %d: %+v %v", raw, i, d, err)
			}
		}
		closer.Close()
	}
}

func FuzzOpen(f *testing.F) {
	for _, s := range []string{"memory", "redis://localhost:6379/0?prefix=a", "redis-cluster://a:1,b:2?prefix=x",
		"redis-sentinel://u:p@m@a:1/2", "unix:///tmp/s?db=1", "file:state.db", "file:///tmp/state.db", "file://localhost/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if strings.HasPrefix(raw, "file:") {
			// Files are made only in a directory of the test's own.
			path, err := storeurl.FilePath(raw)
			if err == nil && !filepath.IsLocal(path) {
				return
			}
			t.Chdir(t.TempDir())
		}
		s, c, err := storeurl.Open(raw)
		if err != nil {
			if s != nil || c != nil {
				t.Fatalf("%q: error %v with a store", raw, err)
			}
			return
		}
		c.Close()
	})
}

// No error shows a URL's password, as written or unescaped.
func TestErrorsHidePasswords(t *testing.T) {
	for _, raw := range []string{
		"redis://user:s3cr%2Ft@127.0.0.1:notaport/0",
		"redis://:s3cr%2Ft@127.0.0.1:6379/x",
		"redis-cluster://user:s3cr%2Ft@127.0.0.1:1,bad",
		"redis-sentinel://user:s3cr%2Ft@mymaster@127.0.0.1:1?nope=1",
	} {
		_, _, err := storeurl.Open(raw)
		if err == nil || !errors.Is(err, storeurl.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want an error wrapping ErrInvalidURL", raw, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cr") || !strings.Contains(msg, "xxxxx") {
			t.Errorf("Open(%q): %q shows the password or hides nothing", raw, msg)
		}
	}
}

// The Redis clients heed their calls' deadlines, and their timeouts are
// ClientTimeout unless the URL sets them.
func TestClientTimeouts(t *testing.T) {
	type timeouts struct {
		ctx                       bool
		dial, read, write, inPool time.Duration
	}
	ct := storeurl.ClientTimeout
	for _, c := range []struct {
		raw  string
		want timeouts
	}{
		{"redis://localhost:6379", timeouts{true, ct, ct, ct, ct}},
		{"unix:///run/redis.sock?read_timeout=5s&dial_timeout=2s", timeouts{true, 2 * time.Second, 5 * time.Second, ct, ct}},
		{"redis-cluster://a:7000,b:7001", timeouts{true, ct, ct, ct, ct}},
		{"redis-sentinel://m@a:26379", timeouts{true, ct, ct, ct, ct}},
	} {
		s, closer, err := storeurl.Open(c.raw)
		if err != nil {
			t.Fatalf("%q: %v", c.raw, err)
		}
		var got timeouts
		switch cl := s.(*redisstore.Store).Client().(type) {
		case *redis.Client:
			o := cl.Options()
			got = timeouts{o.ContextTimeoutEnabled, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout}
		case *redis.ClusterClient:
			o := cl.Options()
			got = timeouts{o.ContextTimeoutEnabled, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout}
		}
		if got != c.want {
			t.Errorf("%q: %+v, want %+v", c.raw, got, c.want)
		}
		closer.Close()
	}
}

// A stopped Redis (SIGSTOP) holds no call of a store that Open made past
// its bound: a decision with a 100 ms deadline returns ErrUnavailable by
// then (5.0 s before the clients heeded deadlines), one with none by the
// store's timeout; and so again and again, on a pool of two connections.
func TestChaosStalledServer(t *testing.T) {
	srv := redistest.NewServer(t)
	s, closer, err := storeurl.Open(srv.URL() + "?pool_size=2")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	tb, err := s.Table("n", algo.MustParsePolicy("token-bucket 10/1s"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Decide(context.Background(), "k", 0, 1); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	for round := range 3 {
		for _, budget := range []time.Duration{100 * time.Millisecond, 0} {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			bound := redisstore.DefaultTimeout
			if budget > 0 {
				ctx, cancel = context.WithTimeout(ctx, budget)
				bound = budget
			}
			start := time.Now()
			_, err := tb.Decide(ctx, "k", 0, 1)
			took := time.Since(start)
			cancel()
			t.Logf("round %d, bound %v: %v after %v", round, bound, err, took)
			if !errors.Is(err, redisstore.ErrUnavailable) || took > bound+250*time.Millisecond {
				t.Errorf("round %d, bound %v: %v after %v, want ErrUnavailable", round, bound, err, took)
			}
		}
	}
}

// A Redis URL missing its slashes, or its scheme, says how to write it,
// rather than go-redis's "invalid database number".
func TestOpenMistypedRedisURL(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis:/host", `invalid store URL: "redis:/host": write a Redis server as redis://HOST:PORT[/DB], with two slashes`},
		{"redis:host:6379", `invalid store URL: "redis:host:6379": write a Redis server as redis://HOST:PORT[/DB], with two slashes`},
		{"rediss:/host", `invalid store URL: "rediss:/host": write a Redis server as rediss://HOST:PORT[/DB], with two slashes`},
		{"unix:/tmp/redis.sock", `invalid store URL: "unix:/tmp/redis.sock": write a unix socket as unix:///PATH (three slashes before an absolute PATH)`},
		{"localhost:6379", `invalid store URL: "localhost:6379" has no scheme: for a Redis server, write redis://localhost:6379`},
		{"10.0.0.1:6379", `invalid store URL: "10.0.0.1:6379" has no scheme: for a Redis server, write redis://10.0.0.1:6379`},
	} {
		_, _, err := storeurl.Open(tc.url)
		if !errors.Is(err, storeurl.ErrInvalidURL) || err.Error() != tc.want {
			t.Errorf("Open(%q) = %v, want %s", tc.url, err, tc.want)
		}
	}
}
