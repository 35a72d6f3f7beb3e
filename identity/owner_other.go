//go:build !unix

package identity

import "io/fs"

// checkOwner is a no-op where files have no Unix owner.
func checkOwner(fs.FileInfo) error { return nil }
