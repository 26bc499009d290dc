//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filestore

import (
	"errors"
	"os"
)

// mapMetas fails: the deny cache answers nothing here (lockingOpen keeps
// no descriptor of the file).
func mapMetas(*os.File, int64) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapMetas([]byte) {}
