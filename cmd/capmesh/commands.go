package main

import (
	"github.com/spf13/cobra"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/auditcmd"
	"github.com/capmesh/capmesh/cmd/capmesh/internal/callcmd"
	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"
	"github.com/capmesh/capmesh/cmd/capmesh/internal/evidencecmd"
	"github.com/capmesh/capmesh/cmd/capmesh/internal/hashcmd"
	"github.com/capmesh/capmesh/cmd/capmesh/internal/keyscmd"
	"github.com/capmesh/capmesh/cmd/capmesh/internal/mcpcmd"
	"github.com/capmesh/capmesh/cmd/capmesh/internal/registrycmd"
)

// familyCommands are the top-level commands whose families live in
// packages under internal/, each built from the process's cli.Env. server,
// chp-fixtures and version stay in this package.
var familyCommands = []func(cli.Env) *cobra.Command{
	auditcmd.NewAudit, auditcmd.NewCompose,
	callcmd.NewCall, callcmd.NewInspect,
	hashcmd.New,
	keyscmd.NewKeys, keyscmd.NewDescriptor,
	mcpcmd.New,
	registrycmd.New,
}

func init() {
	for _, f := range familyCommands {
		register(func(a *app) *cobra.Command { return f(a) })
	}
	register(newEvidenceCmd)
}

// newEvidenceCmd is `capmesh evidence`: the family of evidencecmd, with
// `evidence check` (the offline check of a local store) from this package.
func newEvidenceCmd(a *app) *cobra.Command {
	cmd := evidencecmd.New(a)
	cmd.AddCommand(newEvidenceCheckCmd(a))
	return cmd
}
