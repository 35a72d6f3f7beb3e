//go:build !linux

package logstore

import "os"

func datasync(f *os.File) error { return f.Sync() }
