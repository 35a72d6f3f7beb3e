package mcpbridge

import (
	"sort"
	"strconv"
	"strings"
)

// maxOperation bounds an operation derived from a tool name, so that
// domain.operation stays far below the 255 bytes a method may have.
const maxOperation = 128

// reservedDomains are domains whose methods capmesh answers itself (built-ins,
// the CHP binding, the registry, the bridge's own notifications): a wrapped
// server is never given one of them.
var reservedDomains = map[string]bool{
	"capabilities": true, "identity": true, "health": true, "chp": true,
	"rpc": true, "ipc": true, "registry": true, "capability": true, "mcp": true,
}

// ToOperation derives a method segment ([a-z][a-z0-9_]*) from an MCP tool
// name: lowercase letters and digits are kept, an uppercase letter becomes
// lowercase with a "_" before it when it follows a lowercase letter or a
// digit (camelCase → camel_case), every run of other characters becomes one
// "_" ("get-sum" → "get_sum"), and leading and trailing "_" are dropped.
// A result that would not start with a letter gets "t_" in front; an empty
// one is "tool". The result is at most 128 bytes. Distinct names may derive
// the same operation; Methods resolves that.
func ToOperation(name string) string {
	var b strings.Builder
	pendingSep := false
	prevLowerOrDigit := false
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			if pendingSep && b.Len() > 0 {
				b.WriteByte('_')
			}
			pendingSep = false
			b.WriteRune(r)
			prevLowerOrDigit = true
		case r >= 'A' && r <= 'Z':
			if (pendingSep || prevLowerOrDigit) && b.Len() > 0 {
				b.WriteByte('_')
			}
			pendingSep = false
			b.WriteRune(r + ('a' - 'A'))
			prevLowerOrDigit = false
		default:
			pendingSep = true
			prevLowerOrDigit = false
		}
	}
	op := b.String()
	if op == "" {
		return "tool"
	}
	if op[0] < 'a' || op[0] > 'z' {
		op = "t_" + op
	}
	if len(op) > maxOperation {
		op = strings.TrimRight(op[:maxOperation], "_")
	}
	return op
}

// ToDomain derives a capability domain from an MCP server's name: the last
// "/"-separated part, as ToOperation; a reserved domain (capabilities,
// identity, health, chp, rpc, ipc, registry, capability, mcp) gets "_mcp"
// appended.
func ToDomain(serverName string) string {
	if i := strings.LastIndexByte(serverName, '/'); i >= 0 && i < len(serverName)-1 {
		serverName = serverName[i+1:]
	}
	d := ToOperation(serverName)
	if len(d) > 64 {
		d = strings.TrimRight(d[:64], "_")
	}
	if reservedDomains[d] {
		d += "_mcp"
	}
	return d
}

// Methods maps each tool name to its method domain.ToOperation(name). Names
// are taken in byte order; a name whose operation is already taken gets the
// first free suffix "_2", "_3", …, so the mapping is one to one and depends
// only on the set of names.
func Methods(domain string, names []string) map[string]string {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	taken := make(map[string]bool, len(sorted))
	out := make(map[string]string, len(sorted))
	for _, n := range sorted {
		if _, dup := out[n]; dup {
			continue
		}
		op := ToOperation(n)
		m := domain + "." + op
		for i := 2; taken[m]; i++ {
			m = domain + "." + op + "_" + strconv.Itoa(i)
		}
		taken[m] = true
		out[n] = m
	}
	return out
}
