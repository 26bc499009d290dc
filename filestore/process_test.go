package filestore_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/filestore"
	bolt "go.etcd.io/bbolt"
)

// child returns a command that runs the test binary's TestChild with the
// given role and environment.
func child(role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{"FILESTORE_CHILD=" + role}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// Twenty processes, started together, decide on one key of one file at
// one instant (the caller's time): exactly the policy's capacity, 20 of
// 40 attempts, is admitted. They race to create the file, too.
func TestProcessesShareExactly(t *testing.T) {
	const procs, attempts = 20, 2
	path := filepath.Join(t.TempDir(), "shared.db")
	type proc struct {
		cmd   *exec.Cmd
		in    io.WriteCloser
		out   *bufio.Reader
		total int
	}
	ps := make([]*proc, procs)
	for i := range ps {
		cmd := child("share", "CHILD_PATH="+path, "CHILD_POLICY=leaky-bucket 1/1h capacity=20", fmt.Sprint("CHILD_ATTEMPTS=", attempts))
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps[i] = &proc{cmd: cmd, in: in, out: bufio.NewReader(out)}
	}
	// Each child says ready, then waits for its standard input to close,
	// so that all of them decide at once.
	for _, p := range ps {
		if line, err := p.out.ReadString('\n'); line != "ready\n" {
			t.Fatalf("a child said %q (%v)", line, err)
		}
	}
	for _, p := range ps {
		p.in.Close()
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			rest, _ := io.ReadAll(p.out)
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("child: %v\n%s", err, rest)
				return
			}
			_, n, ok := strings.Cut(strings.TrimSpace(string(rest)), "admitted=")
			if p.total, _ = strconv.Atoi(strings.Fields(n + " x")[0]); !ok {
				t.Errorf("a child said %q", rest)
			}
		})
	}
	wg.Wait()
	total := 0
	for _, p := range ps {
		total += p.total
	}
	if total != 20 {
		t.Errorf("%d processes admitted %d of %d, want exactly 20", procs, total, procs*attempts)
	}
}

// A process killed (SIGKILL) at a random moment while it decides again
// and again leaves a valid file whose state counts every decision the
// process reported admitted, and at most one more: the one it was making.
// Odd rounds hold the file (WithHold).
func TestKilledMidDecision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "killed.db")
	const policy = "fixed-window 1000000000/1h" // at one instant, Remaining counts down
	s := openStore(t, path)
	tb := table(t, s, "n", policy)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		before, err := tb.Decide(ctx, "k", t0, 0)
		if err != nil {
			t.Fatal(err)
		}
		cmd := child("kill", "CHILD_PATH="+path, "CHILD_POLICY="+policy, "CHILD_HOLD="+strconv.FormatBool(round%2 == 1))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan int, 1)
		first := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			n := 0
			for sc.Scan() {
				if sc.Text() == "admitted" {
					if n++; n == 1 {
						close(first)
					}
				}
			}
			lines <- n
		}()
		select {
		case <-first:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("the child admitted nothing in 30 s")
		}
		// The moment of the kill, a random one in the child's loop.
		time.Sleep(time.Duration(r.Int64N(int64(40 * time.Millisecond))))
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		reported := <-lines

		view(t, path, func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				t.Errorf("round %d: the file fails bbolt's check: %v", round, err)
			}
			return nil
		})
		after, err := tb.Decide(ctx, "k", t0, 0)
		if err != nil {
			t.Fatalf("round %d: after the kill: %v", round, err)
		}
		spent := before.Remaining - after.Remaining
		t.Logf("round %d: %d reported, %d spent", round, reported, spent)
		if spent < int64(reported) || spent > int64(reported)+1 {
			t.Fatalf("round %d: the child reported %d admitted, the file counts %d", round, reported, spent)
		}
	}
}

// TestChild is the child process of the tests that start processes; it
// does nothing in an ordinary run.
func TestChild(t *testing.T) {
	role := os.Getenv("FILESTORE_CHILD")
	if role == "" {
		t.Skip("run by TestProcessesShareExactly, TestKilledMidDecision, TestDiskFull and the deny cache's tests")
	}
	var opts []filestore.Option
	if os.Getenv("CHILD_HOLD") == "true" {
		opts = append(opts, filestore.WithHold())
	}
	if os.Getenv("CHILD_CACHE") == "true" {
		opts = append(opts, filestore.WithDenyCache(1<<20))
	}
	s, err := filestore.Open(os.Getenv("CHILD_PATH"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if role == "serve" {
		childServe(t, s)
		return
	}
	tb, err := s.Table("n", algo.MustParsePolicy(os.Getenv("CHILD_POLICY")))
	if err != nil {
		t.Fatal(err)
	}
	switch role {
	case "share":
		attempts, _ := strconv.Atoi(os.Getenv("CHILD_ATTEMPTS"))
		fmt.Println("ready")
		io.ReadAll(os.Stdin) // until the parent closes it
		admitted := 0
		for range attempts {
			d, err := tb.Decide(ctx, "hot", t0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
		fmt.Printf("admitted=%d\n", admitted)
	case "full":
		childDiskFull(t, s, tb)
	case "kill":
		for {
			d, err := tb.Decide(ctx, "k", t0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				os.Stdout.WriteString("admitted\n")
			}
		}
	}
}
