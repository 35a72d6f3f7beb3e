package registry_test

import "os"

// Unix socket paths are limited to ~108 bytes, so sockets go under /tmp
// rather than t.TempDir's long path.
func osMkdirTemp() (string, error) { return os.MkdirTemp("", "cmreg") }
func osRemoveAll(p string)         { _ = os.RemoveAll(p) }
