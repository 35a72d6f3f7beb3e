// Command capmesh is the single binary of the capmesh project: it runs a
// capability node (`capmesh server`), calls and audits any host that speaks
// the Capability Wire Standard, the Primal IPC Protocol or CHP, and manages
// keys, descriptors, fingerprints and evidence.
//
// Exit codes follow the UniBin conventions:
//
//	0   success
//	1   error
//	2   usage or configuration error
//	3   network error (cannot connect, connection lost, timeout)
//	130 interrupted (SIGINT/SIGTERM)
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
