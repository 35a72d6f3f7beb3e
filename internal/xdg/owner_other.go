//go:build !unix

package xdg

import "io/fs"

func checkOwner(fs.FileInfo) error { return nil }
