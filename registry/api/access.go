package api

import "github.com/capmesh/capmesh/access"

// accessOps classifies the node's own methods for the host's access
// policy (docs/access.md); a method not listed — capability.call, a routed
// domain.operation — is an invocation.
var accessOps = map[string]access.Op{
	"ipc.register":        access.OpRegister,
	"ipc.heartbeat":       access.OpRegister,
	"ipc.unregister":      access.OpRegister,
	"registry.enroll":     access.OpAdminister,
	"registry.invite":     access.OpAdminister,
	"registry.revoke":     access.OpAdminister,
	"ipc.resolve":         access.OpPublic,
	"ipc.discover":        access.OpPublic,
	"ipc.find_capability": access.OpPublic,
	"ipc.list":            access.OpPublic,
	"ipc.watch":           access.OpPublic,
	"capability.discover": access.OpPublic,
	// Songbird's names of ipc.resolve and ipc.discover (issue 17).
	"capability.resolve":               access.OpPublic,
	"discovery.find_by_capability":     access.OpPublic,
	"net.discovery.find_by_capability": access.OpPublic,
	"discovery.by_capability":          access.OpPublic,
	"registry.certificates":            access.OpPublic,
	"registry.crl":                     access.OpPublic,
	"registry.info":                    access.OpPublic,
}

// AccessOp implements access.Classifier: registration is left to the
// registry's own checks (a signed descriptor, or the node's user on its
// Unix socket), the operator methods need the node's own user, discovery
// is public, and everything else is an invocation.
func (a *rpcAssigner) AccessOp(method string) access.Op {
	if op, ok := accessOps[method]; ok {
		return op
	}
	return access.OpInvoke
}
