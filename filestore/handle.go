package filestore

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// handle is the file, open: bbolt's database, and the descriptor that
// holds its lock (nil where bbolt opens the file itself).
type handle struct {
	db   *bolt.DB
	file *os.File
}

// close closes the database, or, when a transaction of it is stuck (its
// lock never released, so that bbolt's Close would wait for ever), the
// descriptor alone, which releases the file's lock; the mapping of the
// file is then lost, which is why a Store stops opening a file that has
// got one stuck (Store.damaged) until it changes.
func (h *handle) close() {
	if h.db != nil {
		h.db.Close()
	} else if h.file != nil {
		h.file.Close()
	}
}

// health is what a transaction left of the database it ran in.
type health int

const (
	intact      health = iota
	damagedFile        // reading the file panicked; the transaction rolled back
	stuck              // the rollback panicked too: the database cannot close
)

// release ends a call's use of h: it closes the file unless the store
// holds it (WithHold), and after damage even then, so that the next call
// opens the file afresh: a file restored meanwhile is used again. The
// caller holds s.mu.
func (s *Store) release(h *handle, hl health) {
	if hl == stuck {
		h.db = nil // its Close would wait for ever
		s.markDamaged(fmt.Errorf("filestore: %s: %w: a transaction could not roll back", s.path, ErrCorrupt))
	}
	if s.cfg.hold && hl == intact {
		s.held = h
		return
	}
	s.held = nil
	// After a commit the decisions stand, whatever Close says: the kernel
	// drops the lock with the descriptor anyway.
	h.close()
}

// errPanicked marks an error made of a panic (guard).
var errPanicked = errors.New("panicked")

// guard runs f, turning a panic into an error wrapping ErrCorrupt that
// says what the store was doing: bbolt panics on a damaged page, and a
// read of the mapped file past its end (a file truncated under it) is a
// fault that debug.SetPanicOnFault makes a panic.
func (s *Store) guard(doing string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s the file %w: %v", ErrCorrupt, doing, errPanicked, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return f()
}

// open opens the file, creating it when no file is at the path, and
// waiting while others hold it as w says. A file that opening found
// damaged is not opened again until it changes.
func (s *Store) open(w *waiter) (*handle, error) {
	if err := s.stillDamaged(); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(s.path); errors.Is(err, fs.ErrNotExist) {
		if err := s.create(); err != nil {
			return nil, err
		}
	}
	h := &handle{}
	opts := *bolt.DefaultOptions
	// Where lockingOpen takes the lock, bbolt's own attempt succeeds at
	// once; elsewhere bbolt waits for it (0 would mean for ever).
	opts.OpenFile = lockingOpen(w, &h.file)
	opts.Timeout = max(s.cfg.lockTimeout, 1)
	var db *bolt.DB
	err := s.guard("opening", func() (err error) {
		db, err = bolt.Open(s.path, fileMode, &opts)
		return err
	})
	if errors.Is(err, errPanicked) {
		h.close()
		return nil, s.markDamaged(fmt.Errorf("filestore: %s: %w", s.path, err))
	}
	if err != nil {
		return nil, s.openError(err)
	}
	h.db = db
	if h.file != nil {
		if err := checkMetas(h.file); err != nil {
			h.close()
			return nil, fmt.Errorf("filestore: opening %s: %w", s.path, err)
		}
	}
	return h, nil
}

// openError wraps an error of bolt.Open.
func (s *Store) openError(err error) error {
	switch {
	case errors.Is(err, errAbandoned), errors.Is(err, ErrLocked):
		return err
	case errors.Is(err, berrors.ErrTimeout):
		return s.locked()
	case errors.Is(err, errEmpty), errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
		return fmt.Errorf("filestore: opening %s: %w: %w", s.path, ErrNotStore, err)
	case errors.Is(err, ErrCorrupt):
		return fmt.Errorf("filestore: opening %s: %w", s.path, err)
	case errors.Is(err, berrors.ErrChecksum):
		return fmt.Errorf("filestore: opening %s: %w: %w", s.path, ErrCorrupt, err)
	}
	return fmt.Errorf("filestore: opening %s: %w", s.path, err)
}

// errEmpty is the error of an empty file: not a store, since a new store
// is never empty (Store.create).
var errEmpty = errors.New("the file is empty (0 bytes)")

// refuseEmpty returns errEmpty for an empty file, and checkFreelist's
// error for a damaged freelist. A file with no meta page it can read is
// left for bbolt to refuse (Store.open checks it again once bbolt took
// it: see checkMetas).
func refuseEmpty(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return errEmpty
	}
	if err := checkFreelist(f); err != nil && !errors.Is(err, errBoltLayout) {
		return err
	}
	return nil
}

// checkMetas returns an error wrapping errBoltLayout when bbolt opened f
// but filestore can read none of its meta pages: bbolt's format is not
// the one boltformat.go reads, so the freelist guard could not work.
func checkMetas(f *os.File) error {
	if _, ok := currentMeta(f); !ok {
		return fmt.Errorf("%w: bbolt opened the file, filestore can read no meta page: %w", ErrCorrupt, errBoltLayout)
	}
	return nil
}

// markDamaged keeps err as the error of every call until the file changes,
// and returns it. The caller holds s.mu (or is Open).
func (s *Store) markDamaged(err error) error {
	fi, serr := os.Stat(s.path)
	if serr == nil {
		s.damaged, s.damagedErr = fi, err
	}
	return err
}

// stillDamaged returns the error of a damaged file (markDamaged) while the
// file is the same, the same size and as modified; nil once it changed (a
// copy restored in its place, say).
func (s *Store) stillDamaged() error {
	if s.damaged == nil {
		return nil
	}
	fi, err := os.Stat(s.path)
	if err == nil && os.SameFile(fi, s.damaged) && fi.Size() == s.damaged.Size() && fi.ModTime().Equal(s.damaged.ModTime()) {
		return s.damagedErr
	}
	s.damaged, s.damagedErr = nil, nil
	return nil
}

// create makes a new store at the path, unless a file is there already:
// it writes the new store in a file of its own beside the path, then links
// that file to the path, which fails when another process was first. So a
// file at the path is never a store in the making, and an empty one is no
// store at all.
func (s *Store) create() error {
	tmp := fmt.Sprintf("%s.%d-%x.new", s.path, os.Getpid(), rand.Uint64())
	defer os.Remove(tmp)
	db, err := bolt.Open(tmp, fileMode, &bolt.Options{Timeout: 1})
	if err != nil {
		return fmt.Errorf("filestore: creating %s: %w", s.path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(metaBucket)
		if err == nil {
			err = b.Put(formatKey, formatValue)
		}
		return err
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, s.path)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("filestore: creating %s: %w", s.path, err)
	}
	return nil
}

// formatKey, in metaBucket, marks a file that the store created.
var (
	formatKey   = []byte("format")
	formatValue = []byte("floodgate filestore 1")
)

// isStore returns an error wrapping ErrNotStore unless the database of tx
// is a floodgate store: one that holds the store's own bucket, or no
// bucket at all (a database no one has written to yet).
func isStore(tx *bolt.Tx) error {
	if tx.Bucket(metaBucket) != nil {
		return nil
	}
	if name, _ := tx.Cursor().First(); name != nil {
		return fmt.Errorf("%w: a bbolt database without floodgate's bucket %q (it holds %q)", ErrNotStore, metaBucket, name)
	}
	return nil
}

// checkFreelist returns an error wrapping ErrCorrupt when the header of
// the file's freelist page is not one: bbolt reads that page when it opens
// the file and frees it at every commit, trusting its header, and garbage
// there (an overflow count of billions) can make a commit run for ever.
// It fails closed: a file with no meta page that it can read is refused
// too (errBoltLayout), for the guard cannot tell what bbolt will trust.
// Open lets bbolt judge such a file first (refuseEmpty).
func checkFreelist(f *os.File) error {
	m, ok := currentMeta(f)
	if !ok {
		return fmt.Errorf("%w: no valid meta page: %w", ErrCorrupt, errBoltLayout)
	}
	id, pages := m.freelist(), m.pgid()
	if id == freelistNone {
		return nil
	}
	var hdr [pageHeaderLen]byte
	if _, err := f.ReadAt(hdr[:], int64(id)*m.pageSize()); err != nil || !freelistHeaderOK(&hdr, id, pages) {
		return fmt.Errorf("%w: the freelist page (%d) is damaged", ErrCorrupt, id)
	}
	return nil
}
