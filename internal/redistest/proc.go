package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readyTimeout bounds how long a new redis-server has to answer PING.
const readyTimeout = 10 * time.Second

// stopTimeout bounds how long Stop waits after SIGTERM before SIGKILL.
const stopTimeout = 5 * time.Second

// proc is one run of redis-server (or redis-cli).
type proc struct {
	cmd  *exec.Cmd
	log  *tail
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // what Wait returned; read only after done is closed
}

// live holds every proc running and every directory made, so that Main can
// stop and remove whatever a test left behind.
var live struct {
	mu    sync.Mutex
	procs map[*proc]struct{}
	dirs  map[string]struct{}
}

// spawn starts the program with args, its output captured in p.log.
//
// Every process is started by one goroutine locked to its OS thread for the
// life of the binary: Linux sends the parent-death signal when the thread
// that started the child exits, not the process, and the Go runtime ends
// the thread of any goroutine that exits while locked to it.
func spawn(name string, args ...string) (*proc, error) {
	cmd := exec.Command(program(name), args...)
	lg := &tail{}
	cmd.Stdout, cmd.Stderr = lg, lg
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = time.Second // should the output pipe outlive the process
	p := &proc{cmd: cmd, log: lg, done: make(chan struct{})}
	errc := make(chan error)
	spawner() <- func() { errc <- cmd.Start() }
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("redistest: starting %s: %w", name, err)
	}
	live.mu.Lock()
	if live.procs == nil {
		live.procs = make(map[*proc]struct{})
	}
	live.procs[p] = struct{}{}
	live.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		live.mu.Lock()
		delete(live.procs, p)
		live.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

var spawner = sync.OnceValue(func() chan<- func() {
	c := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: see spawn
		for f := range c {
			f()
		}
	}()
	return c
})

// kill sends SIGKILL and waits for p to exit.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill() // fails only when p has exited already
	<-p.done
}

// stop sends SIGTERM, waits up to stopTimeout for p to exit, then kills it.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused server takes SIGTERM once it goes on
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.kill()
	}
}

// mkdir makes a directory for a server under os.TempDir, with a short name
// because a unix socket's path must fit in about 100 bytes.
func mkdir() (string, error) {
	dir, err := os.MkdirTemp("", "rt")
	if err != nil {
		return "", fmt.Errorf("redistest: %w", err)
	}
	live.mu.Lock()
	if live.dirs == nil {
		live.dirs = make(map[string]struct{})
	}
	live.dirs[dir] = struct{}{}
	live.mu.Unlock()
	return dir, nil
}

// rmdir removes a directory made by mkdir.
func rmdir(dir string) {
	os.RemoveAll(dir)
	live.mu.Lock()
	delete(live.dirs, dir)
	live.mu.Unlock()
}

// cleanup kills every process still running and removes every directory.
func cleanup() {
	live.mu.Lock()
	procs := make([]*proc, 0, len(live.procs))
	for p := range live.procs {
		procs = append(procs, p)
	}
	dirs := make([]string, 0, len(live.dirs))
	for d := range live.dirs {
		dirs = append(dirs, d)
	}
	live.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	for _, d := range dirs {
		rmdir(d)
	}
}

// waitReady polls PING on network/addr, with a backoff from 2 ms to 100 ms,
// until it answers PONG, p exits, or readyTimeout passes.
func waitReady(p *proc, network, addr string) error {
	deadline := time.Now().Add(readyTimeout)
	var err error
	for wait := 2 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var reply string
		reply, err = do(network, addr, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("PING answered %q", reply)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING on %s %s in %v: %w", network, addr, readyTimeout, err)
		}
		select {
		case <-p.done:
			return fmt.Errorf("redis-server exited: %v", p.err)
		case <-time.After(wait):
		}
	}
}

// do sends one command to the server at network/addr on a new connection
// and returns its reply: a simple or bulk string, or an integer in decimal.
// An error reply is returned as an error.
func do(network, addr string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	if _, err := conn.Write(encode(args)); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s: %s", args[0], line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("%s: bad reply %q", args[0], line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("%s: unexpected reply %q", args[0], line)
}

// encode returns the command args as Redis reads it: a RESP array of
// bulk strings.
func encode(args []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return []byte(b.String())
}

// tail keeps the last tailSize bytes written to it: a process's output.
type tail struct {
	mu  sync.Mutex
	buf []byte
	cut bool // bytes were dropped from the front
}

const tailSize = 64 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

// String returns the output kept, indented, for an error message.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimRight(string(t.buf), "\n")
	if s == "" {
		return "(no output)"
	}
	if t.cut {
		s = "...\n" + s
	}
	return "\t" + strings.ReplaceAll(s, "\n", "\n\t")
}
