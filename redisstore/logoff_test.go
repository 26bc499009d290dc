package redisstore_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
)

// records is a slog.Handler that keeps its records' levels and texts.
type records struct {
	mu    sync.Mutex
	lines []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	return nil
}

func (r *records) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// The store's logger hears once that the deny cache is off, with the
// reason (an ACL that forbids CLIENT), however often the server refuses
// again; once that it is back on; and once that it is off again when its
// connection is lost.
func TestDenyCacheLogsOffAndOn(t *testing.T) {
	srv := redistest.NewServer(t)
	admin := srv.Client(t)
	ctx := context.Background()
	c := noTrackClient(t, srv)
	log := &records{}
	s, err := redisstore.New(c, redisstore.WithDenyCache(1<<20), redisstore.WithLogger(slog.New(log)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	waits, release := make(chan time.Duration), make(chan time.Time)
	redisstore.SetRedialAfter(s, func(d time.Duration) <-chan time.Time { waits <- d; return release })
	tb, err := s.Table("t", algo.MustParsePolicy("token-bucket 2/1h"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Decide(ctx, "k", cacheT0, 1); err != nil { // starts the tracker
		t.Fatal(err)
	}
	for i := range 3 {
		<-waits
		if got := log.all(); len(got) != 1 || !strings.HasPrefix(got[0], "WARN") || !strings.Contains(got[0], "NOPERM") ||
			!strings.Contains(got[0], "server="+srv.Addr()) {
			t.Fatalf("the log with tracking refused: %q; want one warning naming NOPERM and the server", got)
		}
		if i < 2 {
			release <- time.Time{}
		}
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "notrack", "+client").Err(); err != nil {
		t.Fatal(err)
	}
	release <- time.Time{}
	for s.Sync(ctx) != nil {
		time.Sleep(time.Millisecond) // a dial and a handshake under way
	}
	if got := log.all(); len(got) != 2 || !strings.HasPrefix(got[1], "INFO") || !strings.Contains(got[1], "back on") {
		t.Fatalf("the log once tracking: %q; want an INFO record that the cache is back on", got)
	}
	if err := admin.ClientKillByFilter(ctx, "USER", "notrack", "SKIPME", "no").Err(); err != nil {
		t.Fatal(err)
	}
	<-waits
	if got := log.all(); len(got) != 3 || !strings.HasPrefix(got[2], "WARN") {
		t.Fatalf("the log after the connection was killed: %q; want a third record, a warning", got)
	}
	release <- time.Time{}
}
