// Package callcmd holds the commands that talk to one host: `capmesh call`
// (a JSON-RPC call, raw lines, or a CHP HTTP invocation with --chp) and
// `capmesh inspect` (the host's capabilities, identity, health and wire
// level, each checked). Both find the host with cli.Target.
package callcmd
