// Package cli holds what every capmesh subcommand shares: the process it
// runs in (Env: standard streams, logger, state directory, version), the
// exit-status contract (ExitOK … ExitNetwork, UsageErrorf, WithCode,
// SilentExit, MarkGracefulStop), the target flags of the commands that talk
// to one host (Target, NetErr) and small readers and writers of JSON.
//
// The command families live in sibling packages (auditcmd, callcmd,
// evidencecmd, hashcmd, keyscmd, mcpcmd, registrycmd), each exporting
// constructors of type func(Env) *cobra.Command; package main builds the
// command tree from them, maps errors to exit codes and runs the node
// (capmesh server).
//
//	main ──Env──▶ xxxcmd.New(env) ──▶ *cobra.Command ──RunE──▶ error
//	                                   (UsageErrorf / WithCode / SilentExit) ──▶ exit status
package cli
