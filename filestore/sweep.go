package filestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/floodgate/floodgate/algo"
	bolt "go.etcd.io/bbolt"
)

// sweepKeys is how many keys each write transaction looks at, besides its
// own, to delete those that have drained.
const sweepKeys = 32

// sweep looks at up to n keys of the file, from where the last sweep
// stopped (kept in the file), and deletes those drained as of their own
// table's clock (the latest time its ops used, kept in the file), other
// than the keys of this transaction. Such a key would decide as a missing
// one does at that time, so this changes no decision of a caller whose
// time does not step back. A table that has no clock yet is left alone.
func (x *txn) sweep(n int) error {
	if len(x.latest) == 0 {
		return nil
	}
	meta, err := x.tx.CreateBucketIfNotExists(metaBucket)
	if err != nil {
		return fmt.Errorf("creating the bucket %q: %w", metaBucket, err)
	}
	if err := x.keepClocks(meta); err != nil {
		return err
	}
	w := x.startSweep(meta.Get(sweepCursor))
	w.walk(n)
	return w.finish(meta)
}

// sweepWalk is one sweep's way through the tables: where it is (a table's
// name and the key to start from in it, nil for its first), and the
// drained keys it found.
type sweepWalk struct {
	x          *txn
	root       *bolt.Cursor
	start      []byte // the table the walk started in; nil for the first
	name, from []byte
	wrapped    bool  // past the last table, the walk went on from the first
	clock      int64 // the clock of the table the walk is in
	dels       []sweptKey
	emptied    [][]byte // tables that lost keys, to drop if now empty
}

type sweptKey struct {
	bucket, key []byte
	resetAt     int64 // when its state drained
}

// startSweep starts a walk where the cursor stored in the file says.
func (x *txn) startSweep(cursor []byte) *sweepWalk {
	w := &sweepWalk{x: x, root: x.tx.Cursor()}
	var startKey []byte
	w.start, startKey = decodeCursor(cursor)
	w.name, _ = w.root.Seek(w.start)
	if bytes.Equal(w.name, w.start) {
		w.from = startKey
	}
	w.wrapped = len(w.start) == 0
	return w
}

// walk looks at up to n keys, table after table, and collects the drained
// ones; it stops in the middle of a table when n runs out.
func (w *sweepWalk) walk(n int) {
	for n > 0 && w.table() {
		p, b := w.x.store.policyOf(w.name), w.x.tx.Bucket(w.name)
		var ok bool
		if w.clock, ok = w.x.clock(w.name); p == nil || b == nil || !ok {
			n-- // not a table of the store, or no clock to sweep it by
			w.next()
			continue
		}
		var k []byte
		if k, n = w.scan(b, p, n); k != nil {
			w.from = k
			return
		}
		w.next()
	}
}

// table reports whether the walk is at a table to look at: it goes on
// from the first table after the last one, once, and ends where it
// started.
func (w *sweepWalk) table() bool {
	if w.name == nil {
		if w.wrapped {
			return false
		}
		w.wrapped = true
		if w.name, _ = w.root.First(); w.name == nil {
			return false
		}
	}
	return !w.wrapped || len(w.start) == 0 || bytes.Compare(w.name, w.start) < 0
}

// next moves the walk to the first key of the next table.
func (w *sweepWalk) next() {
	w.name, _ = w.root.Next()
	w.from = nil
}

// scan looks at up to n keys of table b, whose policy is p, from w.from,
// collecting the drained ones. It returns the key it stopped at (nil at
// the table's end) and how many keys it may still look at.
func (w *sweepWalk) scan(b *bolt.Bucket, p *algo.Policy, n int) ([]byte, int) {
	c := b.Cursor()
	k, v := c.First()
	if w.from != nil {
		k, v = c.Seek(w.from)
	}
	deleted := false
	for ; k != nil && n > 0; k, v = c.Next() {
		n--
		if at, ok := w.drained(p, k, v); ok {
			w.dels = append(w.dels, sweptKey{bytes.Clone(w.name), bytes.Clone(k), at})
			deleted = true
		}
	}
	if deleted {
		w.emptied = append(w.emptied, bytes.Clone(w.name))
	}
	return k, n
}

// drained reports whether key k, with value v, of the table the walk is
// in has drained as of the table's clock, and when it did. A nested bucket (not
// the store's), a key of this transaction and a value that is not the
// store's are left alone: a caller of its key will find them.
func (w *sweepWalk) drained(p *algo.Policy, k, v []byte) (resetAt int64, ok bool) {
	if v == nil || w.x.has(w.name, k) {
		return 0, false
	}
	var s algo.State
	if s.UnmarshalBinary(v) != nil || v[1] != byte(p.Algorithm()) {
		return 0, false
	}
	at := p.ResetAt(&s)
	return at, at <= w.clock
}

// finish deletes the drained keys the walk found, drops the tables they
// emptied, and stores where the next sweep starts.
func (w *sweepWalk) finish(meta *bolt.Bucket) error {
	next := encodeCursor(w.name, w.from) // a copy, as Put needs
	for _, d := range w.dels {
		if err := w.x.tx.Bucket(d.bucket).Delete(d.key); err != nil {
			return fmt.Errorf("deleting the drained key %q of table %q: %w", d.key, d.bucket, err)
		}
	}
	w.x.swept = w.dels
	if err := w.x.keepHorizons(meta, w.dels); err != nil {
		return err
	}
	if err := w.x.dropEmpty(w.emptied); err != nil {
		return err
	}
	if err := meta.Put(sweepCursor, next); err != nil {
		return fmt.Errorf("writing the sweep's position: %w", err)
	}
	return nil
}

// sweepCursor is the key, in metaBucket, of where the next sweep starts:
// the bucket's name, after its length as a uvarint, then the key.
var sweepCursor = []byte("sweep")

func encodeCursor(bucket, key []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(bucket)))
	return append(append(b, bucket...), key...)
}

// decodeCursor reads encodeCursor's bytes; anything else means the start.
func decodeCursor(b []byte) (bucket, key []byte) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil
	}
	return b[w : w+int(n)], b[w+int(n):]
}

// clocksBucket, in metaBucket, maps the bucket name of each table to its
// clock: the latest time its ops used (other than resets), by which its
// keys are swept, as 8 bytes big-endian.
var clocksBucket = []byte("clocks")

// keepClocks puts in the file the clocks of the tables this transaction
// moved forward.
func (x *txn) keepClocks(meta *bolt.Bucket) error {
	b, err := meta.CreateBucketIfNotExists(clocksBucket)
	if err != nil {
		return fmt.Errorf("creating the bucket %q: %w", clocksBucket, err)
	}
	for name, at := range x.latest {
		if v := b.Get([]byte(name)); len(v) == 8 && int64(binary.BigEndian.Uint64(v)) >= at {
			continue
		}
		if err := b.Put([]byte(name), binary.BigEndian.AppendUint64(nil, uint64(at))); err != nil {
			return fmt.Errorf("writing the clock of table %q: %w", name, err)
		}
	}
	return nil
}

// clock returns the clock of the table whose bucket is named name, and
// whether it has one.
func (x *txn) clock(name []byte) (int64, bool) {
	at, ok := x.latest[string(name)]
	if meta := x.tx.Bucket(metaBucket); meta != nil {
		if b := meta.Bucket(clocksBucket); b != nil {
			if v := b.Get(name); len(v) == 8 {
				at, ok = max(at, int64(binary.BigEndian.Uint64(v))), true
			}
		}
	}
	return at, ok
}

// forgetClock deletes the clock of a table whose bucket is gone.
func (x *txn) forgetClock(name []byte) error {
	meta := x.tx.Bucket(metaBucket)
	if meta == nil {
		return nil
	}
	b := meta.Bucket(clocksBucket)
	if b == nil {
		return nil
	}
	if err := b.Delete(name); err != nil {
		return fmt.Errorf("deleting the clock of table %q: %w", name, err)
	}
	return nil
}

// A table's horizon keeps, in horizonSlots slots chosen by a hash of the
// key, the latest time at which a key the sweep deleted had drained. The
// sweep goes by the table's clock, and a caller whose time is behind it
// (the same table used once with a time far ahead, then at the real time)
// could find a key deleted that, at its own time, had not drained: such a
// key, missing, decides as refused until its slot's time (txn.horizon).
// Keys that share a slot can only be refused longer, never admitted more.
const horizonSlots = 64

// horizonsBucket, in metaBucket, maps the bucket name of each table the
// sweep deleted keys of to its horizon: horizonSlots times, 8 bytes
// big-endian each. It outlives the table, whose deleted keys may come
// back.
var horizonsBucket = []byte("horizons")

// horizonSlot returns the slot of a stored key.
func horizonSlot(stored []byte) int {
	h := fnv.New32a()
	h.Write(stored)
	return int(h.Sum32() % horizonSlots)
}

// keepHorizons moves the horizons of the tables of dels to their keys'
// times.
func (x *txn) keepHorizons(meta *bolt.Bucket, dels []sweptKey) error {
	if len(dels) == 0 {
		return nil
	}
	b, err := meta.CreateBucketIfNotExists(horizonsBucket)
	if err != nil {
		return fmt.Errorf("creating the bucket %q: %w", horizonsBucket, err)
	}
	for _, d := range dels {
		v := b.Get(d.bucket)
		if len(v) != 8*horizonSlots {
			v = make([]byte, 8*horizonSlots)
		} else {
			v = bytes.Clone(v)
		}
		i := 8 * horizonSlot(d.key)
		if int64(binary.BigEndian.Uint64(v[i:])) >= d.resetAt {
			continue
		}
		binary.BigEndian.PutUint64(v[i:], uint64(d.resetAt))
		if err := b.Put(d.bucket, v); err != nil {
			return fmt.Errorf("writing the horizon of table %q: %w", d.bucket, err)
		}
	}
	return nil
}

// horizon returns the time in the horizon of the table whose bucket is
// named bucket for the stored key k: 0 when there is none.
func (x *txn) horizon(bucket, k []byte) int64 {
	meta := x.tx.Bucket(metaBucket)
	if meta == nil {
		return 0
	}
	b := meta.Bucket(horizonsBucket)
	if b == nil {
		return 0
	}
	v := b.Get(bucket)
	if len(v) != 8*horizonSlots {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v[8*horizonSlot(k):]))
}
