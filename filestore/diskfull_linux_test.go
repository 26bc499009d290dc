package filestore_test

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/store"
	bolt "go.etcd.io/bbolt"
)

// A file that cannot grow (a child process's RLIMIT_FSIZE, standing in for
// a full disk) fails the call that needs more room, with the error, and
// changes nothing; what was committed before stays, in a valid file.
func TestDiskFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.db")
	cmd := child("full", "CHILD_PATH="+path, "CHILD_POLICY=fixed-window 1/8784h")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	oks, failure := 0, ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "ok":
			oks++
		case strings.HasPrefix(line, "err "):
			failure = line
		case strings.HasPrefix(line, "fail "):
			t.Error(line)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if oks == 0 || !strings.Contains(failure, "filestore: ") || !strings.Contains(failure, "file too large") {
		t.Fatalf("%d batches went in, then %q; want some, then a write error", oks, failure)
	}
	t.Logf("%d batches went in, then %s", oks, failure)
	view(t, path, func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("the file fails bbolt's check: %v", err)
		}
		return nil
	})
	if n := keyCounts(t, path)["n@fixed-window 1/8784h"]; n != oks*diskFullBatch {
		t.Fatalf("%d keys in the file, want the %d of the %d batches that went in", n, oks*diskFullBatch, oks)
	}
}

const diskFullBatch = 50

// childDiskFull is TestDiskFull's child: it fills the file, 50 keys per
// Apply, until a call fails, and checks that the failed call left nothing.
func childDiskFull(t *testing.T, s *filestore.Store, tb store.Table) {
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = min(lim.Max, uint64(fi.Size())+256<<10)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 200)
	for i := range 10000 {
		ops := make([]store.Op, diskFullBatch)
		for j := range ops {
			ops[j] = store.Op{Kind: store.OpDecide, Table: tb, Key: fmt.Sprint(i, "-", j, pad), Now: t0, N: 1}
		}
		if err := s.Apply(ctx, ops); err != nil {
			fmt.Println("err", err)
			for _, op := range ops {
				if d, err := tb.Decide(ctx, op.Key, t0, 0); err != nil || d.Remaining != 1 {
					fmt.Printf("fail the failed call spent on %q: %+v %v\n", op.Key, d, err)
				}
			}
			return
		}
		fmt.Println("ok")
	}
	fmt.Println("fail no error in 10000 calls")
}
