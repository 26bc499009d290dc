package filestore_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// Calls that share a transaction are each carried out as if alone, in the
// order they came: while the file is held, 60 calls queue one after
// another (admissions, denials, bad input, schedules, refunds, resets, on
// two tables), then go in one transaction, and each gets exactly what the
// memory store gives the same calls made one by one.
func TestBatchDecidesAsIfAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	fs := openStore(t, path)
	mem := memstore.New(0)
	policies := []string{"token-bucket 3/1s burst=4", "sliding-log 5/1m"}
	var tf, tm []store.Table
	for _, p := range policies {
		tf = append(tf, table(t, fs, "n "+p, p)) // a name per policy: apart
		tm = append(tm, table(t, mem, "n "+p, p))
	}
	r := rand.New(rand.NewPCG(3, 5))
	const calls = 60
	var opsF, opsM [calls][]store.Op
	for i := range calls {
		for range 1 + r.IntN(3) {
			ti := r.IntN(2)
			op := store.Op{Key: fmt.Sprint("k", r.IntN(2)), Now: t0 + int64(i)*int64(100*time.Millisecond), N: int64(r.IntN(6))}
			switch r.IntN(8) {
			case 0:
				op.Kind, op.MaxWait = store.OpSchedule, time.Second
			case 1:
				op.Kind = store.OpReset
			case 2:
				op.Kind, op.N = store.OpDecide, -1
			default:
				op.Kind = store.OpDecide
			}
			f, m := op, op
			f.Table, m.Table = tf[ti], tm[ti]
			opsF[i], opsM[i] = append(opsF[i], f), append(opsM[i], m)
		}
	}
	errsF := make([]chan error, calls)
	release := holdFile(t, path)
	waiting := -1 // the calls waiting for the file, besides the one holding the batcher
	for i := range calls {
		errsF[i] = make(chan error, 1)
		go func() { errsF[i] <- fs.Apply(ctx, opsF[i]) }()
		switch {
		case slices.ContainsFunc(opsF[i], func(op store.Op) bool { return op.N < 0 }):
			// Bad input is refused before the call waits for the file.
			err := <-errsF[i]
			errsF[i] <- err
		case waiting < 0:
			waitFor(t, func() bool { return filestore.Busy(fs) })
			waiting = 0
		default:
			waiting++
			waitFor(t, func() bool { return filestore.PendingCalls(fs) == waiting })
		}
	}
	release()
	for i := range calls {
		errF, errM := <-errsF[i], mem.Apply(ctx, opsM[i])
		if !storetest.SameErrors(errF, errM) {
			t.Fatalf("call %d: the file's error %v, memory's %v", i, errF, errM)
		}
		if errM != nil {
			continue
		}
		for j := range opsM[i] {
			f, m := opsF[i][j], opsM[i][j]
			if f.Result.Decision != m.Result.Decision || f.Result.At != m.Result.At || f.Result.Stamp != m.Result.Stamp || !storetest.SameErrors(f.Result.Err, m.Result.Err) {
				t.Fatalf("call %d op %d: file %+v at %d stamp %+v (%v), memory %+v at %d stamp %+v (%v)",
					i, j, f.Result.Decision, f.Result.At, f.Result.Stamp, f.Result.Err, m.Result.Decision, m.Result.At, m.Result.Stamp, m.Result.Err)
			}
		}
	}
}
