package memstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/memtable"
)

// ErrInvalidSnapshot is returned by Store.ReadSnapshot, wrapped with
// the problem, for input that WriteSnapshot did not write: a bad header, an
// unknown version, a truncated or altered snapshot (its checksum does not
// match), a bad policy or state. Nothing is loaded then.
var ErrInvalidSnapshot = errors.New("invalid memory store snapshot")

// The snapshot format, version 1. Numbers are unsigned varints; a string
// is its length, then its bytes.
//
//	"FGSNAP" 0x01                    magic and version
//	't' NAME POLICY                  a table: a limiter's name and policy (its
//	                                 text, as Policy.String writes it)
//	'k' KEY STATE                    a key of the last table and its state
//	                                 (algo.State.MarshalBinary), repeated
//	...                              more tables, each followed by its keys
//	'e' TABLES KEYS                  the end, with the counts of each record
//	CRC                              CRC-32C (Castagnoli) of every byte
//	                                 before it, 4 bytes big-endian
const (
	snapshotMagic   = "FGSNAP"
	snapshotVersion = 1
	recTable        = 't'
	recKey          = 'k'
	recEnd          = 'e'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteSnapshot writes the state of every key the store holds that has not
// drained at now (nanoseconds since the Unix epoch) to w, for ReadSnapshot
// to load into a store of another process: a restart that keeps the
// limits. Drained keys are left out, since they decide as missing keys do.
//
// The snapshot is a versioned binary encoding, closed by a checksum. Each
// key's state is copied atomically, but the store is not stopped: a key
// decided on while WriteSnapshot runs is written as it was before or after
// that decision. Deciding and writing proceed in parallel, shard by shard:
// a decision waits at most for the copying of one shard's states.
//
// WriteSnapshot returns w's first error, wrapped.
func (m *Store) WriteSnapshot(w io.Writer, now int64) error {
	m.mu.Lock()
	type named struct {
		name string
		l    *live
	}
	tables := make([]named, 0, len(m.tables))
	for k, t := range m.tables {
		tables = append(tables, named{k.name, t.cur.Load()})
	}
	m.mu.Unlock()
	slices.SortFunc(tables, func(a, b named) int { return a.l.id - b.l.id })

	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 64<<10)
	bw.WriteString(snapshotMagic)
	bw.WriteByte(snapshotVersion)
	var nTables, nKeys uint64
	var entries []memtable.Entry
	var buf []byte
	for _, t := range tables {
		written := false
		for i := range t.l.t.Shards() {
			entries = t.l.t.AppendEntries(entries[:0], i, now)
			if len(entries) > 0 && !written {
				buf = append(buf[:0], recTable)
				buf = appendString(buf, t.name)
				buf = appendString(buf, t.l.t.Policy().String())
				bw.Write(buf)
				written = true
				nTables++
			}
			for _, e := range entries {
				buf = append(buf[:0], recKey)
				buf = appendString(buf, e.Key)
				state, err := e.State.MarshalBinary()
				if err != nil {
					return fmt.Errorf("memstore: snapshot of key %q: %w", e.Key, err)
				}
				buf = appendString(buf, string(state))
				if _, err := bw.Write(buf); err != nil {
					return fmt.Errorf("memstore: writing a snapshot: %w", err)
				}
				nKeys++
			}
		}
	}
	buf = append(buf[:0], recEnd)
	buf = binary.AppendUvarint(buf, nTables)
	buf = binary.AppendUvarint(buf, nKeys)
	bw.Write(buf)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("memstore: writing a snapshot: %w", err)
	}
	if _, err := w.Write(crc.Sum(nil)); err != nil {
		return fmt.Errorf("memstore: writing a snapshot: %w", err)
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// ReadSnapshot loads a snapshot that WriteSnapshot wrote, all of it or
// nothing: it reads r to its end, checks the whole snapshot, and only then
// stores its keys, each in the table of its limiter's name and policy
// (made if missing, as Table makes it). A key's state replaces the one the
// store holds for that key, if any; keys not in the snapshot are left
// alone. States drained at now (nanoseconds since the Unix epoch) are
// skipped, and the store's bound on keys per table holds as in any other
// store of a key.
//
// Input that WriteSnapshot could not have written (a bad header or version,
// a checksum that does not match, a bad policy, a state that does not
// decode or belongs to another algorithm than its table's policy, extra
// bytes) is an error wrapping ErrInvalidSnapshot, and loads nothing. So is
// an error reading r, wrapped.
//
// Tables of policies that no limiter uses any more are restored too; their
// keys hold memory until a snapshot written after they drain leaves them
// out.
func (m *Store) ReadSnapshot(r io.Reader, now int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("memstore: reading a snapshot: %w", err)
	}
	recs, err := parseSnapshot(data)
	if err != nil {
		return fmt.Errorf("memstore: %w: %w", ErrInvalidSnapshot, err)
	}
	for _, rt := range recs {
		tb, err := m.Table(rt.name, rt.policy)
		if err != nil {
			return fmt.Errorf("memstore: restoring table %q: %w", rt.name, err) // not reached: the policy is valid
		}
		t := tb.(*table)
		for _, e := range rt.keys {
			t.put(e.Key, e.State, now)
		}
	}
	return nil
}

// snapshotTable is one table of a parsed snapshot.
type snapshotTable struct {
	name   string
	policy algo.Policy
	keys   []memtable.Entry
}

// parseSnapshot checks and decodes a whole snapshot.
func parseSnapshot(data []byte) ([]snapshotTable, error) {
	const head = len(snapshotMagic) + 1
	if len(data) < head+crc32.Size || !strings.HasPrefix(string(data), snapshotMagic) {
		return nil, errors.New("not a snapshot (no FGSNAP header)")
	}
	if v := data[len(snapshotMagic)]; v != snapshotVersion {
		return nil, fmt.Errorf("version %d, want %d", v, snapshotVersion)
	}
	body, sum := data[:len(data)-crc32.Size], data[len(data)-crc32.Size:]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(sum); got != want {
		return nil, fmt.Errorf("checksum %08x, want %08x: the snapshot is truncated or corrupt", got, want)
	}
	p := snapshotParser{b: body[head:]}
	var tables []snapshotTable
	var nKeys uint64
	for {
		switch rec := p.byte(); rec {
		case recTable:
			name := p.string("a table's name")
			text := p.string("a table's policy")
			if p.err != nil {
				return nil, p.err
			}
			pol, err := algo.ParsePolicy(text)
			if err != nil {
				return nil, fmt.Errorf("table %q: %w", name, err)
			}
			tables = append(tables, snapshotTable{name: name, policy: pol})
		case recKey:
			key := p.string("a key")
			state := p.string("a state")
			if p.err != nil {
				return nil, p.err
			}
			if len(tables) == 0 {
				return nil, fmt.Errorf("key %q before any table", key)
			}
			t := &tables[len(tables)-1]
			var s algo.State
			if err := s.UnmarshalBinary([]byte(state)); err != nil {
				return nil, fmt.Errorf("key %q of table %q: %w", key, t.name, err)
			}
			if alg := algo.Algorithm(state[1]); alg != t.policy.Algorithm() {
				return nil, fmt.Errorf("key %q of table %q: a state of algorithm %d under a %v policy", key, t.name, alg, t.policy.Algorithm())
			}
			t.keys = append(t.keys, memtable.Entry{Key: key, State: s})
			nKeys++
		case recEnd:
			nt, nk := p.uvarint("the table count"), p.uvarint("the key count")
			switch {
			case p.err != nil:
				return nil, p.err
			case nt != uint64(len(tables)) || nk != nKeys:
				return nil, fmt.Errorf("the end counts %d tables and %d keys, the snapshot has %d and %d", nt, nk, len(tables), nKeys)
			case len(p.b) > 0:
				return nil, fmt.Errorf("%d bytes after the end", len(p.b))
			}
			return tables, nil
		default:
			if p.err != nil {
				return nil, p.err
			}
			return nil, fmt.Errorf("unknown record type %#x", rec)
		}
	}
}

// snapshotParser reads a snapshot's records, remembering the first problem.
type snapshotParser struct {
	b   []byte
	err error
}

func (p *snapshotParser) byte() byte {
	if len(p.b) == 0 {
		p.fail(errors.New("truncated: no end record"))
		return 0
	}
	c := p.b[0]
	p.b = p.b[1:]
	return c
}

func (p *snapshotParser) uvarint(what string) uint64 {
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		p.fail(fmt.Errorf("%s: truncated or overlong number", what))
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *snapshotParser) string(what string) string {
	n := p.uvarint(what)
	if p.err != nil {
		return ""
	}
	if n > uint64(len(p.b)) {
		p.fail(fmt.Errorf("%s of %d bytes, %d left", what, n, len(p.b)))
		return ""
	}
	s := string(p.b[:n])
	p.b = p.b[n:]
	return s
}

func (p *snapshotParser) fail(err error) {
	if p.err == nil {
		p.err = err
	}
	p.b = nil
}
