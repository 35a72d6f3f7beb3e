// Package mcpbridge joins the Model Context Protocol and capmesh in both
// directions, with the official MCP Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// Wrap turns an MCP server into a capmesh host: each tool becomes a
// domain.operation capability with the tool's inputSchema, listed by a Level 3
// capabilities.list, described by a CHP descriptor, and called through the
// host's CHP boundary (input schema, policy, budgets, approval, hash-chained
// evidence) before the bridge forwards it as tools/call. Each tool carries its
// khoralabs fingerprint (fingerprint.ToolSpec hash of name, description and
// inputSchema) in its descriptor's metadata, and Bridge.Link states all of them
// as a capability link, so that a changed tool definition shows as a changed
// hash (`capmesh hash diff`) and, with pins, is refused by policy. A tool
// the server changes or removes while wrapped (tools/list_changed) is
// disabled until the bridge restarts.
//
//	MCP client session (stdio command or streamable HTTP)
//	   ◄── tools/call {name, arguments, _meta{progressToken, capmesh/correlation_id}}
//	host (socket, registration with the node) ─► CHP boundary ─► bridge handler
//
// NewServer does the opposite: it exposes the capabilities of a capmesh node
// (only those whose providers the node trusts) or of one host as an MCP server
// whose tools are the capabilities, with the input schemas of their CHP
// descriptors; each tools/call is a capmesh call, routed and governed there,
// and a denial or failure comes back as an MCP tool error whose structured
// content names the outcome, the correlation and the evidence.
//
// # Names
//
// A capability's method is `<domain>.<operation>`, operation derived from the
// tool name by ToOperation (camelCase and kebab-case become snake_case). The
// mapping is stated: every descriptor's metadata carries the tool's own name
// under "mcp_tool", and the bridge maps a method back through it, so it is
// reversible even where two names would derive the same operation (the later
// one, in name order, gets a numeric suffix). In the other direction a
// capability's method is already a valid MCP tool name and is used as is.
//
// # Progress and correlation
//
// A capmesh caller asks for progress by putting a token in the correlation
// baggage of its call, `_meta.correlation.baggage.mcp_progress_token`; the
// bridge forwards the call with a progress token of its own and sends each
// notifications/progress of the MCP server back on the caller's connection as
// an `mcp.progress` notification carrying the caller's token (for up to 5 s
// after the result, since the SDK may deliver the last ones late). The CHP
// correlation id of every call reaches the MCP server as
// `_meta["capmesh/correlation_id"]`.
package mcpbridge
