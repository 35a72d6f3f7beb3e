//go:build unix

package xdg

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// CheckOwner reports an error wrapping ErrNotOwner when fi belongs to a
// user other than the effective one (the owner of every file and
// directory capmesh creates).
func CheckOwner(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("%w: uid %d, not the current user (uid %d)", ErrNotOwner, st.Uid, uid)
	}
	return nil
}
