package wire

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Method names of the built-in surface every host serves.
const (
	MethodCapabilitiesList = "capabilities.list"
	MethodIdentityGet      = "identity.get"
	MethodHealthLiveness   = "health.liveness"
	MethodHealthReadiness  = "health.readiness"
	MethodHealthCheck      = "health.check"
)

// CapabilitiesListAliases are the other names real hosts answer
// capabilities.list under: the standard's own alias capability.list and the
// legacy primal.capabilities. A reader tries capabilities.list first.
var CapabilitiesListAliases = []string{"capability.list", "primal.capabilities"}

// Protocol is the value of the protocol field for JSON-RPC 2.0 hosts.
const Protocol = "jsonrpc-2.0"

// Transport names used in the transport field.
const (
	TransportUDS  = "uds"
	TransportTCP  = "tcp"
	TransportHTTP = "http"
)

// CapabilitiesList is the result a host returns to capabilities.list: the
// full Level 3 envelope of the Capability Wire Standard. The field order is
// the order in which the standard presents the fields.
//
// Marshalling always writes every Level 2 and Level 3 field, with empty
// arrays and objects in place of nil, so that a host which consumes nothing
// still declares consumed_capabilities: [] (Level 3 asks for the field to be
// present). signed_announcement and transport_security are written only when
// set.
type CapabilitiesList struct {
	// Primal is the canonical host name: lowercase, no spaces.
	Primal string `json:"primal"`
	// Version is the host's SemVer version.
	Version string `json:"version"`
	// Methods lists every callable method, built-ins included, fully
	// qualified (domain.operation).
	Methods []string `json:"methods"`
	// ProvidedCapabilities groups the methods by domain with short names;
	// see GroupByDomain.
	ProvidedCapabilities []ProvidedCapability `json:"provided_capabilities"`
	// ConsumedCapabilities lists the methods this host calls on other hosts.
	ConsumedCapabilities []string `json:"consumed_capabilities"`
	// CostEstimates gives cost hints per method (or per domain).
	CostEstimates map[string]CostEstimate `json:"cost_estimates"`
	// OperationDependencies maps a method to the methods that must have
	// run before it.
	OperationDependencies map[string][]string `json:"operation_dependencies"`
	// Protocol is "jsonrpc-2.0".
	Protocol string `json:"protocol"`
	// Transport lists the transports actually bound ("uds", "tcp", "http").
	Transport []string `json:"transport"`
	// SignedAnnouncement, when set, attests primal, version and methods.
	SignedAnnouncement *SignedAnnouncement `json:"signed_announcement,omitempty"`
	// TransportSecurity, when set, says whether a BTSP handshake is needed.
	TransportSecurity *TransportSecurity `json:"transport_security,omitempty"`
}

// MarshalJSON writes the envelope with empty arrays and objects for nil
// fields, so that every Level 3 field is present.
func (l CapabilitiesList) MarshalJSON() ([]byte, error) {
	type plain CapabilitiesList
	p := plain(l)
	if p.Methods == nil {
		p.Methods = []string{}
	}
	if p.ProvidedCapabilities == nil {
		p.ProvidedCapabilities = []ProvidedCapability{}
	}
	for i := range p.ProvidedCapabilities {
		if p.ProvidedCapabilities[i].Methods == nil {
			p.ProvidedCapabilities[i].Methods = []string{}
		}
	}
	if p.ConsumedCapabilities == nil {
		p.ConsumedCapabilities = []string{}
	}
	if p.CostEstimates == nil {
		p.CostEstimates = map[string]CostEstimate{}
	}
	if p.OperationDependencies == nil {
		p.OperationDependencies = map[string][]string{}
	} else {
		deps := make(map[string][]string, len(p.OperationDependencies))
		for k, v := range p.OperationDependencies {
			if v == nil {
				v = []string{}
			}
			deps[k] = v
		}
		p.OperationDependencies = deps
	}
	if p.Transport == nil {
		p.Transport = []string{}
	}
	return json.Marshal(p)
}

// ProvidedCapability is one entry of provided_capabilities: a domain and the
// short names of its methods (session.create within type dag means the
// method dag.session.create).
type ProvidedCapability struct {
	Type        string   `json:"type"`
	Methods     []string `json:"methods"`
	Version     string   `json:"version,omitempty"`
	Description string   `json:"description,omitempty"`
}

// GroupByDomain builds provided_capabilities from fully qualified method
// names: one group per domain (the text before the first dot), groups sorted
// by domain, each group's short names in the order the methods were given.
// Names without a dot are skipped (they cannot be grouped).
func GroupByDomain(methods []string) []ProvidedCapability {
	idx := map[string]int{}
	var groups []ProvidedCapability
	for _, m := range methods {
		domain, short, ok := strings.Cut(m, ".")
		if !ok || domain == "" || short == "" {
			continue
		}
		i, seen := idx[domain]
		if !seen {
			i = len(groups)
			idx[domain] = i
			groups = append(groups, ProvidedCapability{Type: domain})
		}
		groups[i].Methods = append(groups[i].Methods, short)
	}
	sort.SliceStable(groups, func(a, b int) bool { return groups[a].Type < groups[b].Type })
	return groups
}

// CPU cost classes used in cost_estimates.
const (
	CostLow    = "low"
	CostMedium = "medium"
	CostHigh   = "high"
)

// CostEstimate is one entry of cost_estimates.
type CostEstimate struct {
	// CPU is "low", "medium" or "high".
	CPU string `json:"cpu"`
	// LatencyMS is the expected latency in milliseconds.
	LatencyMS float64 `json:"latency_ms"`
	// MemoryBytes is the expected memory use, when known.
	MemoryBytes *int64 `json:"memory_bytes,omitempty"`
	// GPUEligible says whether the method can run on a GPU, when known.
	GPUEligible *bool `json:"gpu_eligible,omitempty"`
}

// Identity is the result of identity.get.
type Identity struct {
	// Primal must equal the primal field of capabilities.list.
	Primal string `json:"primal"`
	// Version must equal the version field of capabilities.list.
	Version string `json:"version"`
	// Domain is the host's primary capability domain (SHOULD).
	Domain string `json:"domain,omitempty"`
	// License is an SPDX license identifier (MAY).
	License string `json:"license,omitempty"`
}

// ParseIdentity reads an identity.get result. Fields beyond the standard's
// (loamSpine adds capability_domain, ecobin_grade, edition) are ignored; a
// result that is not an object, or whose primal or version is not a
// string, is an error.
func ParseIdentity(result json.RawMessage) (Identity, error) {
	var v any
	if err := json.Unmarshal(result, &v); err != nil {
		return Identity{}, fmt.Errorf("identity.get result: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Identity{}, fmt.Errorf("identity.get result is %s, want an object {primal, version}", kindOf(v))
	}
	var id Identity
	for _, f := range []struct {
		key string
		dst *string
	}{{"primal", &id.Primal}, {"version", &id.Version}, {"domain", &id.Domain}, {"license", &id.License}} {
		switch x := obj[f.key].(type) {
		case nil:
		case string:
			*f.dst = x
		default:
			return Identity{}, fmt.Errorf("identity.get %s is %s, want a string", f.key, kindOf(x))
		}
	}
	return id, nil
}

// TransportSecurity is the transport_security object (TS-01): whether a BTSP
// handshake is required before JSON-RPC traffic is accepted. A host must
// advertise what its listeners actually enforce.
type TransportSecurity struct {
	// BTSPRequired is true when a BTSP handshake is mandatory.
	BTSPRequired bool `json:"btsp_required"`
	// BTSPVersion is the BTSP protocol version supported, e.g. "2.0";
	// empty when the host does not speak BTSP.
	BTSPVersion string `json:"btsp_version,omitempty"`
	// BTSPServerAvailable says whether btsp.server.* methods are exposed.
	BTSPServerAvailable bool `json:"btsp_server_available"`
	// CleartextAvailable says whether plaintext JSON-RPC is accepted.
	CleartextAvailable bool `json:"cleartext_available"`
	// CleartextMethods, a capmesh extension, lists the methods a socket
	// that requires BTSP still serves in cleartext (discovery and health),
	// so that probes know what they may ask before a handshake.
	CleartextMethods []string `json:"cleartext_methods,omitempty"`
	// Note is optional human-readable guidance.
	Note string `json:"note,omitempty"`
}
