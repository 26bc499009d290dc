package server

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A configuration, token file or TLS key that others may write is refused
// with an error naming the setting, the mode and the fix; one that others
// may only read (a Kubernetes secret's 0644) is taken.
func TestWritableSecretsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("mode bits are not Windows's permissions")
	}
	dir := t.TempDir()
	certs(t, dir)
	writeFile(t, filepath.Join(dir, "token"), "s3cret\n")
	cfg := filepath.Join(dir, "floodgate.yaml")
	writeFile(t, cfg, "auth: {token_file: token}\ntls: {cert_file: server.pem, key_file: server.key}\n")
	load := func() error {
		c, err := LoadConfig(cfg)
		if err == nil {
			_, err = c.readTokens("")
		}
		if err == nil {
			_, err = c.readTLS()
		}
		return err
	}
	for _, c := range []struct {
		file, setting string
		mode          os.FileMode
	}{
		{"floodgate.yaml", "the configuration file", 0o666},
		{"token", "auth.token_file", 0o620},
		{"server.key", "tls.key_file", 0o602},
	} {
		path := filepath.Join(dir, c.file)
		chmod(t, path, c.mode)
		err := load()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.setting) || !strings.Contains(err.Error(), "chmod go-w") {
			t.Errorf("%s at %04o: %v, want it refused naming %s", c.file, c.mode, err, c.setting)
		}
		chmod(t, path, 0o644)
	}
	if err := load(); err != nil {
		t.Errorf("every file at 0644: %v", err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
