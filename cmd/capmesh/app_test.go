package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/spf13/cobra"
)

// TestSignalExitCodes: a signal (the command's context cancelled) ends a
// long-running command with 0 and silently, and interrupts a one-shot
// command with 1 and "interrupted" on stderr; an error that is not the
// cancellation keeps its own code.
func TestSignalExitCodes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	long := markGracefulStop(&cobra.Command{Use: "server"})
	short := &cobra.Command{Use: "call"}
	for _, tt := range []struct {
		name   string
		cmd    *cobra.Command
		err    error
		want   int
		stderr string
	}{
		{"long-running, stopped", long, context.Canceled, exitOK, ""},
		{"long-running, ended cleanly", long, nil, exitOK, ""},
		{"one-shot, interrupted", short, context.Canceled, exitFailure, "capmesh: interrupted\n"},
		{"usage error during shutdown", long, usageErrorf("bad"), exitUsage, "capmesh: bad\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := exitCode(ctx, tt.cmd, tt.err, &stderr); got != tt.want || stderr.String() != tt.stderr {
				t.Errorf("exitCode = %d, stderr %q; want %d, %q", got, stderr.String(), tt.want, tt.stderr)
			}
		})
	}
}

// TestEveryGroupRefusesUnknownSubcommands walks the whole command tree:
// every group answers an unknown subcommand with a usage error (exit 2)
// and every command's help ends with the exit contract.
func TestEveryGroupRefusesUnknownSubcommands(t *testing.T) {
	var out, errb bytes.Buffer
	root := newRootCmd(&app{stdout: &out, stderr: &errb})
	var walk func(c *cobra.Command)
	groups := 0
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			walk(s)
		}
		if c == root || !c.HasSubCommands() || c.Runnable() && c.Args == nil {
			return
		}
		if c.Args == nil || !c.Runnable() {
			t.Errorf("%s: group without strict args", c.CommandPath())
			return
		}
		groups++
		if err := c.Args(c, []string{"zzz"}); exitCode(context.Background(), c, err, &errb) != exitUsage {
			t.Errorf("%s zzz: %v, want a usage error", c.CommandPath(), err)
		}
	}
	walk(root)
	if groups < 5 {
		t.Errorf("only %d groups checked", groups)
	}
	if !bytes.Contains([]byte(root.HelpTemplate()), []byte(exitContract)) {
		t.Error("the help template does not end with the exit contract")
	}
}
