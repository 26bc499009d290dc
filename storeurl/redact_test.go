package storeurl_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/storeurl"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct{ name, raw, want string }{
		{"user and password", "redis://user:s3cret@localhost:6379/2", "redis://user:xxxxx@localhost:6379/2"},
		{"password alone", "redis://:s3cret@localhost:6379", "redis://:xxxxx@localhost:6379"},
		{"rediss with parameters", "rediss://u:p@localhost:6379/0?prefix=app:&dial_timeout=1s",
			"rediss://u:xxxxx@localhost:6379/0?prefix=app:&dial_timeout=1s"},
		{"password with @", "redis://u:p@ss@localhost:6379/1", "redis://u:xxxxx@localhost:6379/1"},
		{"password with escaped /", "redis://u:s3cr%2Ft@localhost:6379", "redis://u:xxxxx@localhost:6379"},
		{"password with unescaped /", "redis://u:s3cr/t@localhost:6379/0", "redis://u:xxxxx@localhost:6379/0"},
		{"password with :", "redis://u:a:b@localhost:6379", "redis://u:xxxxx@localhost:6379"},
		{"@ in the parameters", "redis://u:p@localhost:6379?prefix=a@b", "redis://u:xxxxx@localhost:6379?prefix=a@b"},
		{"no password", "redis://localhost:6379/2", "redis://localhost:6379/2"},
		{"user alone", "redis://user@localhost:6379", "redis://user@localhost:6379"},
		{"empty password", "redis://user:@localhost:6379", "redis://user:@localhost:6379"},
		{"no password, @ in the parameters", "redis://localhost:6379?prefix=a@b", "redis://localhost:6379?prefix=a@b"},
		{"unix socket", "unix:///run/redis.sock?db=1", "unix:///run/redis.sock?db=1"},
		{"unix socket with a password", "unix://u:p@/run/redis.sock?db=1", "unix://u:xxxxx@/run/redis.sock?db=1"},
		{"unix socket with @ in its path", "unix://u:p@/run/a:b@c.sock", "unix://u:xxxxx@/run/a:b@c.sock"},
		{"unix socket path like a password", "unix:///run/a:b@c.sock", "unix:///run/a:b@c.sock"},
		{"cluster", "redis-cluster://a:7000,b:7001?prefix={fg}:", "redis-cluster://a:7000,b:7001?prefix={fg}:"},
		{"cluster with a password", "redis-cluster://user:pa%40ss@a:7000,b:7001", "redis-cluster://user:xxxxx@a:7000,b:7001"},
		{"sentinel", "redis-sentinel://mymaster@a:26379,b:26379/3", "redis-sentinel://mymaster@a:26379,b:26379/3"},
		{"sentinel with a password", "redis-sentinel://u:p@mymaster@a:26379", "redis-sentinel://u:xxxxx@mymaster@a:26379"},
		{"sentinel, password with @", "redis-sentinel://:p@ss@mymaster@a:26379/1", "redis-sentinel://:xxxxx@mymaster@a:26379/1"},
		{"memory", "memory", "memory"},
		{"empty", "", ""},
		{"file path", "file:/var/lib/a:b@c.db", "file:/var/lib/a:b@c.db"},
		{"file URL", "file:///var/lib/a:b@c.db", "file:///var/lib/a:b@c.db"},
		{"file URL on localhost", "file://localhost/var/lib/a:b@c.db", "file://localhost/var/lib/a:b@c.db"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := storeurl.Redact(c.raw); got != c.want {
				t.Errorf("Redact(%q) = %q, want %q", c.raw, got, c.want)
			}
		})
	}
}

// Redact agrees with net/url on where a URL's password is (redis-sentinel,
// whose MASTER@ net/url does not know, aside), and redacts once.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"redis://u:p@h:1/0", "redis://u:p@ss@h:1?prefix=a@b", "unix://u:p@/run/s.sock",
		"redis-cluster://u:p@a:1,b:2", "redis-sentinel://u:p@m@a:1", "redis://u:s/t@h:1", "file:x.db", "memory"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := storeurl.Redact(raw)
		if again := storeurl.Redact(got); again != got {
			t.Fatalf("Redact(%q) = %q, but Redact of that is %q", raw, got, again)
		}
		u, err := url.Parse(raw)
		if err != nil || u.User == nil || !strings.HasPrefix(raw, u.Scheme+"://") || u.Scheme == "redis-sentinel" {
			return // not a store URL's form, or not one net/url reads as Open does
		}
		pw, ok := u.User.Password()
		r, err := url.Parse(got)
		if err != nil {
			t.Fatalf("Redact(%q) = %q, which net/url does not parse: %v", raw, got, err)
		}
		want := pw
		if ok && pw != "" {
			want = "xxxxx"
		}
		if rpw, _ := r.User.Password(); rpw != want || r.User.Username() != u.User.Username() || r.Host != u.Host {
			t.Fatalf("Redact(%q) = %q: user %q, password %q, host %q; want %q, %q, %q",
				raw, got, r.User.Username(), rpw, r.Host, u.User.Username(), want, u.Host)
		}
	})
}

func ExampleRedact() {
	fmt.Println(storeurl.Redact("redis://app:s3cret@localhost:6379/0?prefix=app:"))
	fmt.Println(storeurl.Redact("redis-sentinel://app:s3cret@mymaster@10.0.0.1:26379,10.0.0.2:26379"))
	fmt.Println(storeurl.Redact("unix:///run/redis.sock?db=1"))
	// Output:
	// redis://app:xxxxx@localhost:6379/0?prefix=app:
	// redis-sentinel://app:xxxxx@mymaster@10.0.0.1:26379,10.0.0.2:26379
	// unix:///run/redis.sock?db=1
}
