package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// corruptDataPages writes garbage over every branch, leaf and freelist
// page of the bbolt file at path, in place, as a failing disk might.
func corruptDataPages(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	size := int(le.Uint32(b[24:])) // page 0: a 16-byte header, magic, version, page size
	r := rand.New(rand.NewPCG(3, 4))
	n := 0
	for id := 2; (id+1)*size <= len(b); id++ {
		page := b[id*size : (id+1)*size]
		if f := le.Uint16(page[8:]); f == 0x01 || f == 0x02 || f == 0x10 {
			id += int(le.Uint32(page[12:]))
			for i := range page {
				page[i] = byte(r.Uint32())
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no page to corrupt")
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}

// A floodgate serve on a file store whose pages are overwritten with
// garbage while it serves: every request answers 503 at once (it used to
// hang for good), the log names the file and the damage, a check process
// on the file meanwhile exits 2 with a one-line error (it used to print a
// Go panic); once a copy of the file is put back, serve uses it again when
// its failsafe next tries the store, and check at once, with the state it
// held, no restart.
func TestChaosServeCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	p := startServe(t, nil, "--store", "file:"+path)
	const body = `{"policy_text":"fixed-window 10/1h","key":"k"}`
	for range 3 {
		if code, out := call(t, "POST", p.url("/v1/check"), body); code != 200 {
			t.Fatalf("before the damage: %d %v", code, out)
		}
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	corruptDataPages(t, path)
	client := &http.Client{Timeout: 10 * time.Second}
	var worst time.Duration
	for range 20 {
		start := time.Now()
		resp, err := client.Post(p.url("/v1/check"), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("a request on the damaged file: %v", err)
		}
		resp.Body.Close()
		worst = max(worst, time.Since(start))
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("a request on the damaged file: %d, want 503", resp.StatusCode)
		}
	}
	t.Logf("20 requests on the damaged file: 503, the slowest in %v", worst)
	if worst > time.Second {
		t.Fatalf("a request on the damaged file took %v", worst)
	}
	if code, out := call(t, "GET", "http://"+p.addrs["metrics"]+"/readyz", ""); code != 503 {
		t.Fatalf("/readyz on the damaged file: %d %v, want 503", code, out)
	}
	// The failsafe logs the store going down once the failures have lasted
	// its fail_for (250ms), naming the error.
	eventually(t, "serve's log naming the file and the damage", func() bool {
		call(t, "POST", p.url("/v1/check"), body)
		return strings.Contains(p.stderr.String(), "filestore: opening "+path+": corrupt file")
	})
	got := runBinary(t, nil, "check", "--store=file:"+path, "--policy", "fixed-window 10/1h", "k")
	if got.code != exitUsage || strings.Count(got.stderr, "\n") != 1 || !strings.Contains(got.stderr, path) || strings.Contains(got.stderr, "panic") {
		t.Fatalf("check on the damaged file: exit %d, stderr %q; want exit 2 and one line naming the file", got.code, got.stderr)
	}
	t.Logf("check on the damaged file: exit %d: %s", got.code, got.stderr)

	if err := os.WriteFile(path, good, 0o666); err != nil { // cp good.db state.db
		t.Fatal(err)
	}
	restored := time.Now()
	for {
		code, out := call(t, "POST", p.url("/v1/check"), body)
		if code == 200 {
			if out["remaining"] != 6.0 {
				t.Fatalf("after the restore: %v, want the 4th of 10 admitted", out)
			}
			break
		}
		// serve's failsafe probes the store every cooldown (500ms): back
		// within a second of the restore.
		if time.Since(restored) > time.Second {
			t.Fatalf("serve still failing 1s after the restore: %d %v", code, out)
		}
		time.Sleep(10 * time.Millisecond) // the restore is a real event
	}
	t.Logf("serve used the restored file %v after the restore", time.Since(restored))
	wantRun(t, "check after the restore", runBinary(t, nil, "check", "--store=file:"+path, "--cost", "0", "--policy", "fixed-window 10/1h", "k"), 0, "")
}

// A zero-length state file, another program's bbolt database, or bytes
// that are not one: check exits 2 with one line naming the file, and
// leaves the file as it was (an empty file used to become a new store).
func TestCheckRefusesFileThatIsNoStore(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	junk := filepath.Join(dir, "junk.db")
	foreign := filepath.Join(dir, "foreign.db")
	os.WriteFile(empty, nil, 0o666)
	os.WriteFile(junk, []byte(strings.Repeat("junk", 5000)), 0o666)
	db, err := bolt.Open(foreign, 0o666, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("users")); return err })
	db.Close()
	for _, path := range []string{empty, junk, foreign} {
		before, _ := os.ReadFile(path)
		got := runBinary(t, nil, "check", "--store=file:"+path, "--policy", "fixed-window 10/1h", "k")
		if got.code != exitUsage || strings.Count(got.stderr, "\n") != 1 || !strings.Contains(got.stderr, path) || !strings.Contains(got.stderr, "not a floodgate store") {
			t.Errorf("check on %s: exit %d, stderr %q; want exit 2 and one line naming the file", filepath.Base(path), got.code, got.stderr)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Errorf("check changed %s", filepath.Base(path))
		}
	}
}

// check processes on one file and key, killed with SIGKILL at random
// moments, many of them in the middle of a decision: after every round the
// file passes bbolt's check, and over all rounds no more events are
// admitted than the policy allows, nor counted than admitted and killed.
func TestChaosCheckKilled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	bin := floodgateBinary(t)
	const policy, limit = "fixed-window 30/1h", 30
	r := rand.New(rand.NewPCG(7, 8))
	rounds := 50
	if testing.Short() {
		rounds = 10
	}
	var admitted, killed int
	for round := range rounds {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 4 {
			cmd := exec.Command(bin, "check", "--store=file:"+path, at(0), "--policy", policy, "k")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			delay := time.Duration(r.IntN(10000)) * time.Microsecond
			wg.Go(func() {
				if i%2 == 0 {
					time.Sleep(delay) // a random moment in the process's life
					cmd.Process.Signal(syscall.SIGKILL)
				}
				err := cmd.Wait()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					admitted++
				case cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled():
					killed++
				case cmd.ProcessState.ExitCode() != exitFailure:
					t.Errorf("round %d: check: %v", round, err)
				}
			})
		}
		wg.Wait()
		if _, err := os.Stat(path); err != nil {
			continue // every process of the round was killed before the file existed
		}
		db, err := bolt.Open(path, 0o666, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				t.Errorf("round %d: the file fails bbolt's check: %v", round, err)
			}
			return nil
		})
		db.Close()
	}
	got := runBinary(t, nil, "check", "--store=file:"+path, at(time.Second), "--json", "--cost", "0", "--policy", policy, "k")
	if got.code != 0 {
		t.Fatalf("after the kills: exit %d, %s", got.code, got.stderr)
	}
	var remaining int
	if i := strings.Index(got.stdout, `"remaining":`); i >= 0 {
		_, err := fmt.Sscan(got.stdout[i+len(`"remaining":`):], &remaining)
		if err != nil {
			t.Fatal(err)
		}
	}
	used := limit - remaining
	t.Logf("%d rounds: %d admitted, %d killed, %d counted of %d", rounds, admitted, killed, used, limit)
	if admitted > limit || used < admitted || used > admitted+killed {
		t.Fatalf("%d admitted and %d killed, %d counted: want at most %d admitted, counted between admitted and admitted+killed", admitted, killed, used, limit)
	}
	if admitted+killed < limit {
		t.Fatalf("only %d processes decided; the test wants the policy full", admitted+killed)
	}
}
