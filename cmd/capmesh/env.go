package main

import (
	"io"
	"log/slog"
)

// *app is the cli.Env every command under internal/ is built with: these
// accessors are how those packages see the process.

// Stdin is the process's standard input.
func (a *app) Stdin() io.Reader { return a.stdin }

// Stdout is the process's standard output.
func (a *app) Stdout() io.Writer { return a.stdout }

// Stderr is the process's standard error.
func (a *app) Stderr() io.Writer { return a.stderr }

// Log is the logger built from --log-level and --log-format.
func (a *app) Log() *slog.Logger { return a.log }

// DataDir is --data-dir ($CAPMESH_DATA_DIR).
func (a *app) DataDir() string { return a.dataDir }

// Version is the capmesh version (versionString).
func (a *app) Version() string { return versionString() }
