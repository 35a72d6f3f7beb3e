//go:build !unix

package sqlite

import "os"

func lockFile(*os.File) error { return nil }
