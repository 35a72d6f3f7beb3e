package wire

import (
	"fmt"
	"regexp"
	"strings"
)

// MethodNamePattern is the exact rule capmesh enforces for method names
// (Semantic Method Naming, as restated by the Capability Wire Standard:
// "<domain>.<operation>", domain lowercase without dots, operation lowercase
// with underscores for multi-word names, further dotted segments allowed as in
// dag.session.create or crypto.x25519.generate):
//
//	^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$
//
// Every dot-separated segment starts with a lowercase ASCII letter and holds
// only lowercase ASCII letters, digits and underscores; there are at least
// two segments. ValidateMethodName additionally limits a name to
// MaxMethodNameLen bytes and reserves the prefix "rpc." (JSON-RPC 2.0 §4).
const MethodNamePattern = `^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`

// MaxMethodNameLen is the longest method name ValidateMethodName accepts, in
// bytes.
const MaxMethodNameLen = 255

var methodNameRE = regexp.MustCompile(MethodNamePattern)

// MethodNameError says why a method name was refused.
type MethodNameError struct {
	Name   string
	Reason string
}

// Error names the method and the naming rule it breaks.
func (e *MethodNameError) Error() string {
	return fmt.Sprintf("method name %q: %s (want domain.operation matching %s)", e.Name, e.Reason, MethodNamePattern)
}

// ValidateMethodName reports whether name may be registered as a capability
// method: it must match MethodNamePattern, be at most MaxMethodNameLen bytes
// long, and not start with "rpc." (reserved by JSON-RPC 2.0 for the protocol
// itself). The error is a *MethodNameError naming the first problem found.
func ValidateMethodName(name string) error {
	if strings.HasPrefix(name, "rpc.") {
		return &MethodNameError{Name: name, Reason: `the prefix "rpc." is reserved by JSON-RPC 2.0`}
	}
	return checkMethodName(name)
}

// checkMethodName applies MethodNamePattern and the length limit; it is the
// naming rule the compliance levels check on other hosts (which may
// legitimately serve rpc.* extensions such as rpc.discover).
func checkMethodName(name string) error {
	if len(name) > MaxMethodNameLen {
		return &MethodNameError{Name: name, Reason: fmt.Sprintf("longer than %d bytes", MaxMethodNameLen)}
	}
	if matchesMethodName(name) {
		return nil
	}
	return &MethodNameError{Name: name, Reason: methodNameProblem(name)}
}

// matchesMethodName is MethodNamePattern without the regexp engine (about
// thirty times faster; FuzzValidateMethodName holds the two equal).
func matchesMethodName(name string) bool {
	segs, start := 0, true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z':
			start = false
		case start:
			return false
		case c >= '0' && c <= '9', c == '_':
		case c == '.':
			segs++
			start = true
		default:
			return false
		}
	}
	return segs >= 1 && !start
}

// methodNameProblem explains why name does not match MethodNamePattern.
func methodNameProblem(name string) string {
	if name == "" {
		return "empty"
	}
	segs := strings.Split(name, ".")
	if len(segs) < 2 {
		return "no dot: a method needs a domain and an operation"
	}
	for i, s := range segs {
		if s == "" {
			return fmt.Sprintf("empty segment %d", i+1)
		}
		for j, r := range s {
			switch {
			case r >= 'a' && r <= 'z':
			case j == 0:
				return fmt.Sprintf("segment %q must start with a lowercase letter", s)
			case r >= '0' && r <= '9', r == '_':
			case r >= 'A' && r <= 'Z':
				return fmt.Sprintf("uppercase letter %q in segment %q", r, s)
			default:
				return fmt.Sprintf("character %q not allowed (only a-z, 0-9 and _)", r)
			}
		}
	}
	return "does not match" // not reached for names the regexp rejects
}
