// Package mcpcmd holds `capmesh mcp`: `mcp wrap` serves an MCP server's
// tools as a governed capmesh host (package mcpbridge, behind a CHP
// boundary), `mcp serve` serves the node's trusted capabilities as an MCP
// server on stdio or streamable HTTP.
package mcpcmd
