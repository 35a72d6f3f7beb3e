package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// Exit codes: the one contract every command follows.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	ExitNetwork = 3
)

// GracefulStop marks a long-running command (in its Annotations) whose
// normal end is a signal: SIGINT or SIGTERM stops it with exit 0.
const GracefulStop = "capmesh/graceful-stop"

// MarkGracefulStop annotates cmd as ended normally by a signal.
func MarkGracefulStop(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[GracefulStop] = "true"
	return cmd
}

// ExitError attaches an exit code to an error.
type ExitError struct {
	Code int
	Err  error
}

// Error is the wrapped error's text.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// UsageErrorf reports a usage or configuration error (exit 2).
func UsageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// WithCode wraps err so that the process exits with code; nil stays nil,
// and an error that already carries a code keeps it.
func WithCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: code, Err: err}
}

// SilentExit makes the process exit with its code without printing anything
// more (the command already reported on stdout/stderr).
type SilentExit int

// Error names the exit status.
func (s SilentExit) Error() string { return fmt.Sprintf("exit status %d", int(s)) }
