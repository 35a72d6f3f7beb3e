// Command capmesh is the single binary of the capmesh project: it runs a
// capability node (`capmesh server`), calls and audits any host that speaks
// the Capability Wire Standard, the Primal IPC Protocol or CHP, and manages
// keys, descriptors, fingerprints and evidence.
//
// Every command follows one exit-status contract (see exitContract):
//
//	0  success, and a graceful stop of a long-running command
//	   (server, registry watch) by SIGINT or SIGTERM
//	1  failure: the command ran and the answer is no (an error reply, an
//	   invalid bundle, an unmet gate, a one-shot command interrupted)
//	2  usage or configuration error: bad arguments, flags, files or
//	   environment variables, an unknown or misspelled command
//	3  unreachable: the host or node cannot be connected to, the
//	   connection was lost, or no reply came within the timeout
//
// This package holds the command tree (app.go), the exit contract, `capmesh
// server`, `capmesh chp-fixtures` and `evidence check`; every other command
// family lives in a package under internal/ (callcmd, auditcmd, registrycmd,
// evidencecmd, hashcmd, keyscmd, mcpcmd) built on internal/cli, and is
// listed in commands.go.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(runMain()) }

// runMain runs capmesh with the process's arguments and streams, with
// SIGINT and SIGTERM cancelling the command's context.
func runMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
