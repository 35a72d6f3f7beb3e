package cli

import (
	"io"
	"log/slog"
)

// Env is what a subcommand needs from the capmesh process. Its values are
// read when the command runs, not when it is built: the logger and the state
// directory come from the global flags, parsed in between.
type Env interface {
	// Stdin, Stdout and Stderr are the command's standard streams.
	Stdin() io.Reader
	Stdout() io.Writer
	Stderr() io.Writer
	// Log is the logger built from --log-level and --log-format.
	Log() *slog.Logger
	// DataDir is --data-dir ($CAPMESH_DATA_DIR); "" means the default.
	DataDir() string
	// Version is the capmesh version (SemVer, without a leading "v").
	Version() string
}
