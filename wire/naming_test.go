package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateMethodName(t *testing.T) {
	valid := []string{
		"dag.session.create", "crypto.blake3_hash", "crypto.x25519.generate", "health.liveness",
		"capabilities.list", "identity.get", "a.b", "storage.artifact.store", "auth.peer_info",
		"crypto.aes128_gcm.encrypt", "a1.b2_c3", "tls_crypto.derive",
		"x." + strings.Repeat("y", MaxMethodNameLen-2),
	}
	for _, name := range valid {
		if err := ValidateMethodName(name); err != nil {
			t.Errorf("ValidateMethodName(%q) = %v, want nil", name, err)
		}
	}
	invalid := []struct{ name, reason string }{
		{"", "empty"},
		{"health", "no dot"},
		{"discover_capabilities", "no dot"},
		{"Braid.create", `segment "Braid" must start with a lowercase letter`},
		{"braid.Create", `segment "Create" must start with a lowercase letter`},
		{"braid.creAte", `uppercase letter 'A' in segment "creAte"`},
		{"braid..create", "empty segment 2"},
		{".braid", "empty segment 1"},
		{"braid.", "empty segment 2"},
		{"braid.create-v2", `character '-' not allowed`},
		{"inclusion-proofs.x", `character '-' not allowed`},
		{"braid.1create", `segment "1create" must start with a lowercase letter`},
		{"_a.b", `segment "_a" must start with a lowercase letter`},
		{"braid.cré", `character 'é' not allowed`},
		{"a.b c", `character ' ' not allowed`},
		{"a.b\n", `character '\n' not allowed`},
		{"rpc.discover", `"rpc." is reserved`},
		{"x." + strings.Repeat("y", MaxMethodNameLen-1), "longer than 255 bytes"},
	}
	for _, tt := range invalid {
		err := ValidateMethodName(tt.name)
		var mne *MethodNameError
		if !errors.As(err, &mne) {
			t.Errorf("ValidateMethodName(%q) = %v, want a *MethodNameError", tt.name, err)
			continue
		}
		if !strings.Contains(mne.Reason, tt.reason) {
			t.Errorf("ValidateMethodName(%q) reason %q, want it to contain %q", tt.name, mne.Reason, tt.reason)
		}
		if !strings.Contains(err.Error(), MethodNamePattern) {
			t.Errorf("error %q does not show the rule", err)
		}
		if methodNameRE.MatchString(tt.name) && !strings.HasPrefix(tt.name, "rpc.") && len(tt.name) <= MaxMethodNameLen {
			t.Errorf("%q matches the pattern but was refused", tt.name)
		}
	}
	// The levels check other hosts without the rpc. reservation: JSON-RPC
	// extensions such as rpc.discover are legitimate there.
	if err := checkMethodName("rpc.discover"); err != nil {
		t.Errorf("checkMethodName(rpc.discover) = %v", err)
	}
}

func FuzzValidateMethodName(f *testing.F) {
	for _, s := range []string{"a.b", "A.b", "a..b", "rpc.x", "é.x", "a.b_c.d9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateMethodName(name)
		want := methodNameRE.MatchString(name) && len(name) <= MaxMethodNameLen && !strings.HasPrefix(name, "rpc.")
		if (err == nil) != want {
			t.Fatalf("ValidateMethodName(%q) = %v, pattern says %v", name, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "does not match") {
			t.Fatalf("no specific reason for %q", name)
		}
	})
}
