//go:build !unix

package xdg

import "io/fs"

// CheckOwner is a no-op where files have no Unix owner.
func CheckOwner(fs.FileInfo) error { return nil }
