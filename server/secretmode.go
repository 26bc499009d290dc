package server

import (
	"fmt"
	"os"
	"runtime"
)

// checkWritable refuses a file that users other than its owner may write,
// as ssh refuses an unprotected key: whoever can write the configuration
// sets the limits, and whoever can write the token file or the TLS key
// lets themselves in. setting names the file in the error (auth.token_file,
// tls.key_file, the configuration file). Read-only mounts (Kubernetes
// secrets and config maps, 0644 or 0444) pass. On Windows, whose
// permissions are not mode bits, nothing is checked.
func checkWritable(setting, path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil // reading it reports the error
	}
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return fmt.Errorf("%w: %s %s is writable by its group or by others (mode %04o): anyone who can write it controls floodgate; run chmod go-w %s",
			ErrInvalidConfig, setting, path, m, path)
	}
	return nil
}
