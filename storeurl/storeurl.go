// Package storeurl opens a store (a store.Store) named by a URL, the form the
// floodgate command's --store flag and configuration files take:
//
//	memory                                   this process's memory (the default)
//	file:PATH                                a file that processes share, taking
//	                                         turns (PATH relative or absolute;
//	                                         also file:///ABSOLUTE/PATH)
//	redis://[USER:PASSWORD@]HOST:PORT[/DB]   one Redis server (rediss:// for TLS)
//	unix://[USER:PASSWORD@]/PATH[?db=DB]     one Redis server on a unix socket
//	redis-cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]
//	                                         a Redis Cluster, from any of its nodes
//	redis-sentinel://[USER:PASSWORD@]MASTER@HOST:PORT[,HOST:PORT...][/DB]
//	                                         the master named MASTER, found
//	                                         through Redis Sentinel
//
// The Redis forms take the query parameter prefix=P, the start of every
// Redis key the store writes (redisstore.WithPrefix), and redis:// and
// unix:// also go-redis's own parameters (dial_timeout, read_timeout,
// pool_size and the others of redis.ParseURL). Its Redis clients heed
// their calls' deadlines (go-redis's ContextTimeoutEnabled), and their
// dial, read, write and pool timeouts are ClientTimeout unless the URL
// sets them: a stalled Redis fails a command within a second, not
// go-redis's default 3 to 5 s. Every call of the store is bounded by
// its own timeout too (redisstore.WithTimeout). The file form opens
// filestore.Open's store with its defaults; PATH is taken as it is,
// without percent-decoding, except in the file:/// form, which is a URL.
// WithDenyCache gives a Redis or file store a deny cache.
//
// Redact hides a URL's password, for logs; Open's errors hide it the same
// way.
package storeurl

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// ClientTimeout is the dial, read, write and pool timeout of the Redis
// clients that Open makes, unless a redis:// or unix:// URL sets its own
// (dial_timeout, read_timeout, write_timeout, pool_timeout).
const ClientTimeout = time.Second

// bounded has a client heed its calls' deadlines (ctxTimeout, go-redis's
// ContextTimeoutEnabled), and sets each of its timeouts ds that is unset
// to ClientTimeout.
func bounded(ctxTimeout *bool, ds ...*time.Duration) {
	*ctxTimeout = true
	for _, d := range ds {
		if *d == 0 {
			*d = ClientTimeout
		}
	}
}

// ErrInvalidURL is returned, wrapped with the problem, for a URL that
// names no store.
var ErrInvalidURL = errors.New("invalid store URL")

// An Option configures the store that Open makes.
type Option func(*options)

type options struct {
	denyCache int64 // bytes; 0: none
	redis     []redisstore.Option
}

// WithDenyCache gives a Redis or a file store a deny cache bounded to
// maxBytes bytes (redisstore.WithDenyCache, filestore.WithDenyCache),
// which answers decisions over their limit without the store's backend;
// 0 means none. The memory store needs none and gets none.
func WithDenyCache(maxBytes int64) Option { return func(o *options) { o.denyCache = maxBytes } }

// WithRedisOptions applies opts to a Redis store after the URL's own;
// other stores ignore them.
func WithRedisOptions(opts ...redisstore.Option) Option {
	return func(o *options) { o.redis = append(o.redis, opts...) }
}

// Open returns the store rawURL names, and a Closer that releases what it
// holds (a Redis client's connections, a file store). A file store's
// file is created when missing, and a file that others hold is waited
// for as filestore.Open says.
//
// An error never shows the URL's password: it is replaced by "xxxxx", as
// Redact replaces it.
func Open(rawURL string, opts ...Option) (store.Store, io.Closer, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	s, c, err := open(rawURL, o)
	if err != nil {
		return nil, nil, hidePassword(err, rawURL)
	}
	return s, c, nil
}

func open(rawURL string, o options) (store.Store, io.Closer, error) {
	scheme, _, _ := strings.Cut(rawURL, ":")
	var client redis.UniversalClient
	var opts []redisstore.Option
	switch scheme {
	case "memory":
		if rawURL != "memory" && rawURL != "memory:" {
			return nil, nil, fmt.Errorf("%w: %q: memory takes no address", ErrInvalidURL, rawURL)
		}
		return memstore.New(0), io.NopCloser(nil), nil
	case "file":
		path, err := filePath(rawURL)
		if err != nil {
			return nil, nil, err
		}
		s, err := filestore.Open(path, filestore.WithDenyCache(o.denyCache))
		if err != nil {
			return nil, nil, err
		}
		return s, s, nil
	case "redis", "rediss", "unix":
		if err := checkSlashes(scheme, rawURL); err != nil {
			return nil, nil, err
		}
		rest, prefix, err := takePrefix(rawURL)
		if err != nil {
			return nil, nil, err
		}
		ro, err := redis.ParseURL(rest)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %q: %w", ErrInvalidURL, rawURL, err)
		}
		bounded(&ro.ContextTimeoutEnabled, &ro.DialTimeout, &ro.ReadTimeout, &ro.WriteTimeout, &ro.PoolTimeout)
		client, opts = redis.NewClient(ro), prefix
	case "redis-cluster", "redis-sentinel":
		var prefix string
		var err error
		if client, prefix, err = clusterOrSentinel(scheme, rawURL); err != nil {
			return nil, nil, fmt.Errorf("%w: %q: %w", ErrInvalidURL, rawURL, err)
		}
		if prefix != "" {
			opts = append(opts, redisstore.WithPrefix(prefix))
		}
	default:
		if isHostPort(rawURL) {
			return nil, nil, fmt.Errorf("%w: %q has no scheme: for a Redis server, write redis://%s", ErrInvalidURL, rawURL, rawURL)
		}
		return nil, nil, fmt.Errorf("%w: %q: want memory, file:PATH, redis://HOST:PORT[/DB], unix:///PATH, redis-cluster://HOST:PORT[,HOST:PORT...] or redis-sentinel://MASTER@HOST:PORT[,...]", ErrInvalidURL, rawURL)
	}
	opts = append(append(opts, redisstore.WithDenyCache(o.denyCache)), o.redis...)
	s, err := redisstore.New(client, opts...)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return s, storeAndClient{s, client}, nil
}

// checkSlashes checks that a redis:, rediss: or unix: URL has the two
// slashes of its form, which go-redis would otherwise misread (redis:/host
// as database "host" on localhost).
func checkSlashes(scheme, raw string) error {
	if strings.HasPrefix(raw, scheme+"://") {
		return nil
	}
	if scheme == "unix" {
		return fmt.Errorf("%w: %q: write a unix socket as unix:///PATH (three slashes before an absolute PATH)", ErrInvalidURL, raw)
	}
	return fmt.Errorf("%w: %q: write a Redis server as %s://HOST:PORT[/DB], with two slashes", ErrInvalidURL, raw, scheme)
}

// isHostPort reports whether s is HOST:PORT, a Redis address without its
// scheme.
func isHostPort(s string) bool {
	host, port, ok := strings.Cut(s, ":")
	_, err := strconv.ParseUint(port, 10, 16)
	return ok && host != "" && !strings.ContainsAny(host, "/@") && err == nil
}

// storeAndClient closes a Redis store (its deny cache's connection),
// then its client.
type storeAndClient struct {
	s *redisstore.Store
	c io.Closer
}

func (sc storeAndClient) Close() error { return errors.Join(sc.s.Close(), sc.c.Close()) }

// filePath returns the path of a file: URL: file:PATH, PATH as it is, or
// file:///PATH (file://localhost/PATH), a URL whose path is absolute and
// percent-decoded.
func filePath(raw string) (string, error) {
	rest, ok := strings.CutPrefix(raw, "file:")
	if !strings.HasPrefix(rest, "//") {
		if !ok || rest == "" {
			return "", fmt.Errorf("%w: %q: no path: want file:PATH or file:///ABSOLUTE/PATH", ErrInvalidURL, raw)
		}
		return rest, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %w", ErrInvalidURL, raw, err)
	}
	switch {
	case u.Host != "" && u.Host != "localhost":
		return "", fmt.Errorf("%w: %q: a file on host %q: want file:PATH or file:///ABSOLUTE/PATH", ErrInvalidURL, raw, u.Host)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("%w: %q: a file URL takes no user, query or fragment", ErrInvalidURL, raw)
	case u.Path == "" || u.Path == "/":
		return "", fmt.Errorf("%w: %q: no path: want file:PATH or file:///ABSOLUTE/PATH", ErrInvalidURL, raw)
	}
	path := u.Path
	if runtime.GOOS == "windows" && len(path) >= 3 && path[0] == '/' && path[2] == ':' {
		path = path[1:] // file:///C:/dir/state.db
	}
	return filepath.FromSlash(path), nil
}

// takePrefix removes the prefix parameter from a redis:// or unix:// URL,
// which go-redis would refuse, and returns it as an option.
func takePrefix(raw string) (string, []redisstore.Option, error) {
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, nil, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %q: %w", ErrInvalidURL, raw, err)
	}
	if !q.Has("prefix") {
		return raw, nil, nil
	}
	opts := []redisstore.Option{redisstore.WithPrefix(q.Get("prefix"))}
	q.Del("prefix")
	if len(q) == 0 {
		return base, opts, nil
	}
	return base + "?" + q.Encode(), opts, nil
}

// clusterOrSentinel makes the client of a redis-cluster:// or
// redis-sentinel:// URL, whose host is a comma-separated list of addresses
// (which net/url does not parse), and returns its prefix parameter.
func clusterOrSentinel(scheme, raw string) (redis.UniversalClient, string, error) {
	rest, ok := strings.CutPrefix(raw, scheme+"://")
	if !ok {
		return nil, "", fmt.Errorf("want %s://HOST:PORT[,HOST:PORT...]", scheme)
	}
	rest, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, "", err
	}
	for k := range q {
		if k != "prefix" {
			return nil, "", fmt.Errorf("unknown parameter %q", k)
		}
	}
	hosts, path, _ := strings.Cut(rest, "/")
	var user, password, master string
	if i := strings.LastIndexByte(hosts, '@'); i >= 0 {
		info := hosts[:i]
		hosts = hosts[i+1:]
		if scheme == "redis-sentinel" {
			// USER:PASSWORD@MASTER@ or MASTER@
			j := strings.LastIndexByte(info, '@')
			master = info[j+1:]
			info = info[:max(j, 0)]
		}
		if info != "" {
			u, p, _ := strings.Cut(info, ":")
			if user, err = url.PathUnescape(u); err == nil {
				password, err = url.PathUnescape(p)
			}
			if err != nil {
				return nil, "", err
			}
		}
	}
	if scheme == "redis-sentinel" && master == "" {
		return nil, "", errors.New("no master name: want redis-sentinel://MASTER@HOST:PORT[,HOST:PORT...]")
	}
	var addrs []string
	for _, a := range strings.Split(hosts, ",") {
		if h, port, ok := strings.Cut(a, ":"); !ok || h == "" || port == "" {
			return nil, "", fmt.Errorf("address %q is not HOST:PORT", a)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, "", fmt.Errorf("address %q has a bad port", a)
		}
		addrs = append(addrs, a)
	}
	if scheme == "redis-cluster" {
		if path != "" {
			return nil, "", errors.New("a Redis Cluster has only database 0")
		}
		o := &redis.ClusterOptions{Addrs: addrs, Username: user, Password: password}
		bounded(&o.ContextTimeoutEnabled, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout)
		return redis.NewClusterClient(o), q.Get("prefix"), nil
	}
	db := 0
	if path != "" {
		if db, err = strconv.Atoi(path); err != nil || db < 0 {
			return nil, "", fmt.Errorf("database %q is not a number", path)
		}
	}
	o := &redis.FailoverOptions{MasterName: master, SentinelAddrs: addrs, Username: user, Password: password, DB: db}
	bounded(&o.ContextTimeoutEnabled, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout)
	return redis.NewFailoverClient(o), q.Get("prefix"), nil
}
