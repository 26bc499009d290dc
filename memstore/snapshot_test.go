package memstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/store"
)

// snapshotPolicies has every algorithm, sliding-log twice (a log of many
// entries and one of few).
var snapshotPolicies = []string{
	"token-bucket 10/1s burst=20", "leaky-bucket 5/1s capacity=7", "sliding-log 30/10s",
	"sliding-log 2/1s", "sliding-window 15/2s", "fixed-window 9/1s",
}

var snapT0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// snapshotLimiters returns a limiter per policy of snapshotPolicies on
// store, plus a second limiter of the first policy under another name.
func snapshotLimiters(t *testing.T, store store.Store) []*floodgate.Limiter {
	t.Helper()
	var ls []*floodgate.Limiter
	for i, ps := range snapshotPolicies {
		ls = append(ls, floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy(ps), floodgate.WithStore(store), floodgate.WithName(fmt.Sprint("l", i)))))
	}
	return append(ls, floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy(snapshotPolicies[0]), floodgate.WithStore(store), floodgate.WithName("other"))))
}

// A snapshot restored into another store decides every key of every
// algorithm exactly as the original does, then and from then on.
func TestSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	orig := memstore.New(0)
	ol := snapshotLimiters(t, orig)
	r := rand.New(rand.NewPCG(1, 2))
	at := snapT0
	const keys = 300
	for range 6000 {
		at = at.Add(time.Duration(r.IntN(int(5 * time.Millisecond))))
		l := ol[r.IntN(len(ol))]
		if _, err := l.AllowAt(ctx, fmt.Sprint("key", r.IntN(keys)), at, int64(r.IntN(3))); err != nil {
			t.Fatal(err)
		}
	}
	var snap bytes.Buffer
	if err := orig.WriteSnapshot(&snap, at.UnixNano()); err != nil {
		t.Fatal(err)
	}
	restored := memstore.New(0)
	if err := restored.ReadSnapshot(bytes.NewReader(snap.Bytes()), at.UnixNano()); err != nil {
		t.Fatal(err)
	}
	// The original may still hold drained keys, which the snapshot leaves out.
	if o, n := orig.Stats().Keys, restored.Stats().Keys; n < keys || n > o {
		t.Errorf("restored %d keys, the original holds %d", n, o)
	}
	rl := snapshotLimiters(t, restored)
	// Both stores now see the same random events: every decision must
	// match, through draining and refilling.
	for i := range 6000 {
		at = at.Add(time.Duration(r.IntN(int(3 * time.Millisecond))))
		j, key, n := r.IntN(len(ol)), fmt.Sprint("key", r.IntN(keys)), int64(r.IntN(3))
		want, werr := ol[j].AllowAt(ctx, key, at, n)
		got, gerr := rl[j].AllowAt(ctx, key, at, n)
		if !sameDecision(want, got) || (werr == nil) != (gerr == nil) {
			t.Fatalf("event %d, %v %s n=%d: restored %+v %v, original %+v %v", i, ol[j].Policy(), key, n, got, gerr, want, werr)
		}
	}
}

func sameDecision(a, b floodgate.Decision) bool {
	return a.Allowed == b.Allowed && a.Remaining == b.Remaining && a.RetryAfter == b.RetryAfter &&
		a.ResetAfter == b.ResetAfter && a.Policy() == b.Policy()
}

// Keys drained at the snapshot's time are left out, and those drained at
// the restore's time are not loaded.
func TestSnapshotSkipsDrained(t *testing.T) {
	ctx := context.Background()
	for _, ps := range snapshotPolicies {
		t.Run(ps, func(t *testing.T) {
			p := algo.MustParsePolicy(ps)
			orig := memstore.New(0)
			l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(orig)))
			// Key i is decided at 3i periods, and drains ResetAfter (at
			// most 2 periods) later: just before the last one drains, it
			// alone has not.
			var end time.Time
			for i := range 10 {
				at := snapT0.Add(time.Duration(3*i) * p.Period())
				d, err := l.AllowAt(ctx, fmt.Sprint(i), at, 1)
				if err != nil {
					t.Fatal(err)
				}
				end = at.Add(d.ResetAfter)
			}
			var full, live bytes.Buffer
			if err := orig.WriteSnapshot(&full, snapT0.UnixNano()); err != nil {
				t.Fatal(err)
			}
			if err := orig.WriteSnapshot(&live, end.Add(-time.Nanosecond).UnixNano()); err != nil {
				t.Fatal(err)
			}
			if full.Len() <= live.Len() {
				t.Errorf("a snapshot of 10 keys takes %d bytes, of 1 key %d", full.Len(), live.Len())
			}
			for _, c := range []struct {
				name string
				snap []byte
				at   time.Time
				keys int
			}{
				{"written late", live.Bytes(), end.Add(-time.Nanosecond), 1},
				{"restored late", full.Bytes(), end.Add(-time.Nanosecond), 1},
				{"restored after all drained", full.Bytes(), end, 0},
			} {
				s := memstore.New(0)
				if err := s.ReadSnapshot(bytes.NewReader(c.snap), c.at.UnixNano()); err != nil {
					t.Fatal(err)
				}
				if got := s.Stats().Keys; got != c.keys {
					t.Errorf("%s: %d keys, want %d", c.name, got, c.keys)
				}
			}
		})
	}
}

func TestSnapshotEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := memstore.New(0).WriteSnapshot(&b, 0); err != nil {
		t.Fatal(err)
	}
	s := memstore.New(0)
	if err := s.ReadSnapshot(&b, 0); err != nil {
		t.Fatal(err)
	}
	if k := s.Stats().Keys; k != 0 {
		t.Errorf("%d keys from an empty snapshot", k)
	}
}

// snapshotOf returns a snapshot of a few keys of every policy.
func snapshotOf(t testing.TB) []byte {
	t.Helper()
	ctx := context.Background()
	s := memstore.New(0)
	for i, ps := range snapshotPolicies {
		l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy(ps), floodgate.WithStore(s), floodgate.WithName(fmt.Sprint("l", i))))
		for k := range 3 {
			if _, err := l.AllowAt(ctx, fmt.Sprint("k", k), snapT0, 2); err != nil {
				t.Fatal(err)
			}
		}
	}
	var b bytes.Buffer
	if err := s.WriteSnapshot(&b, snapT0.UnixNano()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sealed returns body (a snapshot without its checksum) with its checksum.
func sealed(body []byte) []byte {
	return binary.BigEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
}

// Every corruption is refused with ErrInvalidSnapshot and loads nothing:
// the store keeps exactly what it held.
func TestSnapshotCorrupt(t *testing.T) {
	good := snapshotOf(t)
	body := good[:len(good)-4]
	type bad struct {
		name string
		b    []byte
	}
	cases := []bad{
		{"empty", nil},
		{"not a snapshot", []byte("hello, world, this is text")},
		{"version 2", sealed(append([]byte("FGSNAP\x02"), body[7:]...))},
		{"no end record", sealed(body[:len(body)-3])},
		{"unknown record", sealed(append(append([]byte("FGSNAP\x01"), 'x'), body[7:]...))},
		{"key before any table", sealed(append([]byte("FGSNAP\x01k\x01a\x03\x01\x05\x00"), body[7:]...))},
		{"bytes after the end", sealed(append(bytes.Clone(body), 0))},
		{"end counts", sealed(append(bytes.Clone(body[:len(body)-2]), 6, 17))},
		{"bad policy", sealed([]byte("FGSNAP\x01t\x01a\x04nope\x00\x01\x00"))},
		{"overlong string", sealed([]byte("FGSNAP\x01t\x01a\x7fnope"))},
		// A token-bucket table holding a fixed-window state.
		{"state of another algorithm", sealed([]byte(fmt.Sprintf("FGSNAP\x01t\x01a\x1btoken-bucket 10/1s burst=20k\x01k\x05\x01%c\x01\x01\x00e\x01\x01", byte(algo.MustParsePolicy("fixed-window 1/1s").Algorithm()))))},
		{"bad state", sealed([]byte("FGSNAP\x01t\x01a\x1btoken-bucket 10/1s burst=20k\x01k\x02\x09\x09e\x01\x01"))},
	}
	for i := range len(good) {
		cases = append(cases, bad{fmt.Sprint("truncated to ", i), good[:i]})
	}
	for i := range len(good) {
		b := bytes.Clone(good)
		b[i] ^= 1 << (i % 8)
		cases = append(cases, bad{fmt.Sprint("bit flipped in byte ", i), b})
	}
	for _, c := range cases {
		s := memstore.New(0)
		l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1h"), floodgate.WithStore(s)))
		if _, err := l.AllowAt(context.Background(), "mine", snapT0, 1); err != nil {
			t.Fatal(err)
		}
		err := s.ReadSnapshot(bytes.NewReader(c.b), snapT0.UnixNano())
		if !errors.Is(err, memstore.ErrInvalidSnapshot) {
			t.Errorf("%s: error %v, want ErrInvalidSnapshot", c.name, err)
		}
		if k := s.Stats().Keys; k != 1 {
			t.Errorf("%s: the store holds %d keys after a refused snapshot, want its 1", c.name, k)
		}
	}
	// The good one, for contrast.
	if err := memstore.New(0).ReadSnapshot(bytes.NewReader(good), snapT0.UnixNano()); err != nil {
		t.Errorf("the uncorrupted snapshot: %v", err)
	}
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.after {
		return w.after, errors.New("disk full")
	}
	w.after -= len(p)
	return len(p), nil
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestSnapshotIOErrors(t *testing.T) {
	good := snapshotOf(t)
	s := memstore.New(0)
	if err := s.ReadSnapshot(bytes.NewReader(good), snapT0.UnixNano()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 10, len(good) - 2} {
		if err := s.WriteSnapshot(&failingWriter{after: n}, snapT0.UnixNano()); err == nil || !bytes.Contains([]byte(err.Error()), []byte("disk full")) {
			t.Errorf("writer failing after %d bytes: error %v", n, err)
		}
	}
	if err := s.ReadSnapshot(failingReader{}, 0); err == nil || errors.Is(err, memstore.ErrInvalidSnapshot) {
		t.Errorf("a failing reader: error %v, want the reader's", err)
	}
}

// FuzzReadSnapshot gives ReadSnapshot arbitrary records with a correct
// checksum, so that the fuzzer gets past it: it must never panic, and a
// snapshot it accepts must leave a store that decides and writes a snapshot
// that loads again.
func FuzzReadSnapshot(f *testing.F) {
	good := snapshotOf(f)
	f.Add(good[:len(good)-4])
	f.Add([]byte("FGSNAP\x01e\x00\x00"))
	f.Add([]byte("FGSNAP\x01t\x01a\x0asliding-log 2/1sk\x01k\x06\x01\x03\x02\x01\x01\x01e\x01\x01"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := memstore.New(0)
		now := snapT0.UnixNano()
		if err := s.ReadSnapshot(bytes.NewReader(sealed(body)), now); err != nil {
			if !errors.Is(err, memstore.ErrInvalidSnapshot) {
				t.Fatalf("error %v does not wrap ErrInvalidSnapshot", err)
			}
			return
		}
		var again bytes.Buffer
		if err := s.WriteSnapshot(&again, now); err != nil {
			t.Fatal(err)
		}
		if err := memstore.New(0).ReadSnapshot(&again, now); err != nil {
			t.Fatalf("rewriting an accepted snapshot: %v", err)
		}
	})
}
