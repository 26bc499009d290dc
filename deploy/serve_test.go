package deploy_test

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServe runs bin with args (floodgate serve's), until the test ends,
// and returns the addresses it printed it listens on, by name (http, grpc,
// metrics), once it printed that it serves.
func startServe(t *testing.T, bin string, args []string) map[string]string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
	})
	lines := make(chan string)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
		cmd.Wait()
	}()
	addrs := map[string]string{}
	timeout := time.After(30 * time.Second)
	listen := regexp.MustCompile(`^floodgate serve: (http|grpc|metrics) (\S+)$`)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("floodgate %q exited before serving: %s", args, stderr.String())
			}
			if m := listen.FindStringSubmatch(line); m != nil {
				addrs[m[1]] = m[2]
			}
			if strings.HasPrefix(line, "floodgate serve: ready") || strings.HasPrefix(line, "floodgate serve: serving") {
				go func() {
					for range lines {
					}
				}()
				return addrs
			}
		case <-timeout:
			t.Fatalf("floodgate %q did not serve within 30s: %s", args, stderr.String())
		}
	}
}

// assertGet fails t unless GET url answers code.
func assertGet(t *testing.T, url string, code int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != code {
		t.Errorf("GET %s: %d, want %d", url, resp.StatusCode, code)
	}
}

// serveFlags are the flags that `floodgate serve -h` of bin documents.
func serveFlags(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "serve", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("floodgate serve -h: %v\n%s", err, out)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  --([a-z][a-z-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 10 {
		t.Fatalf("floodgate serve -h lists %d flags: %v", len(flags), flags)
	}
	return flags
}
