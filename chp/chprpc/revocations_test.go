package chprpc

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capmesh/capmesh/access"
	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/chp/boundary/mandates"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/internal/errcatalog"
	"github.com/capmesh/capmesh/jsonrpc"
)

// TestRevocationsOverRPC: over a real Unix socket, chp.revoke refuses a
// tampered statement (-32602, nothing kept), accepts the principal's, and
// chp.revocations serves it; the revoked mandate is then mandate_invalid
// through chp.invoke.
func TestRevocationsOverRPC(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	sock := filepath.Join(t.TempDir(), "chp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := jsonrpc.NewServer(jsonrpc.Map(Handlers(b)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		sctx, c2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer c2()
		_ = srv.Shutdown(sctx)
		<-served
	}()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	cl := jsonrpc.NewClient(conn, nil)
	defer cl.Close()

	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	now := time.Now().UTC()
	// The Unix peer, when the kernel reports it, is the transport-verified
	// caller the mandate must name: probe for it as the upstream runner does.
	var probe chp.InvocationResult
	if err := cl.Call(ctx, "chp.invoke", map[string]any{"capability_id": "conformance.echo", "correlation_id": "probe"}, &probe); err != nil {
		t.Fatal(err)
	}
	var replay chp.ReplayResult
	if err := cl.Call(ctx, "chp.replay", map[string]any{"correlation_id": "probe"}, &replay); err != nil || len(replay.Events) == 0 {
		t.Fatal(err)
	}
	var ev struct {
		Subject struct {
			ID       string
			Verified bool
		}
	}
	_ = json.Unmarshal(replay.Events[0], &ev)
	delegate := "conformance-runner"
	if ev.Subject.Verified {
		delegate = ev.Subject.ID
	}
	mandate, err := chp.SignMandate(chp.MandateGrant{PrincipalID: "principal", DelegateID: delegate,
		Scope: []string{"conformance.*"}, ValidFrom: chp.FormatTime(now.Add(-time.Minute)),
		ValidUntil: chp.FormatTime(now.Add(time.Hour)), CreatedAt: chp.FormatTime(now.Add(-time.Minute))}, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := chp.ParseMandate(mandate)
	invoke := func() chp.InvocationResult {
		var res chp.InvocationResult
		if err := cl.Call(ctx, "chp.invoke", map[string]any{"capability_id": "conformance.echo", "mandate": mandate}, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := invoke(); res.Outcome != chp.OutcomeSuccess {
		t.Fatalf("before revocation: %+v", res.Denial)
	}
	stmt, _ := chp.SignMandateRevocation("principal", m.MandateID, chp.FormatTime(now), "", key)
	var tampered map[string]any
	_ = json.Unmarshal(stmt, &tampered)
	tampered["revoked_at"] = chp.FormatTime(now.Add(time.Second))
	var a mandates.AcceptedRevocation
	var rpcErr *jsonrpc.Error
	if err := cl.Call(ctx, "chp.revoke", tampered, &a); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.InvalidParams {
		t.Fatalf("tampered: %v", err)
	}
	if err := cl.Call(ctx, "chp.revoke", json.RawMessage(stmt), &a); err != nil || !a.Accepted || a.MandateID != m.MandateID {
		t.Fatalf("chp.revoke: %v %+v", err, a)
	}
	var set mandates.RevocationSet
	if err := cl.Call(ctx, "chp.revocations", nil, &set); err != nil || len(set.Mandates) != 1 || set.Keys == nil {
		t.Fatalf("chp.revocations: %v %+v", err, set)
	}
	if res := invoke(); res.Denial == nil || res.Denial.Code != chp.CodeMandateInvalid {
		t.Fatalf("after revocation: %+v", res)
	}
}

// TestRevokeOperatorOnly: chp.revoke from a caller that is not the host's
// operator (a named key, another user) refuses the revocation of a mandate
// never presented here with -32003 not_issuer and keeps nothing; the
// operator — the host's own user as the access layer resolves it — may add
// it.
func TestRevokeOperatorOnly(t *testing.T) {
	b := fixtureBoundary(t, evidence.NewMemory())
	h := Handlers(b)["chp.revoke"]
	stmt, err := chp.SignMandateRevocation("principal", "mnd_unseen", chp.FormatTime(time.Now()), "", ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	req := &jsonrpc.Request{Method: "chp.revoke", Params: stmt}
	peer := access.WithPrincipal(context.Background(), access.Principal{Kind: access.NamedKey, Name: "alice"})
	var rpcErr *jsonrpc.Error
	if _, err := h.Handle(peer, req); !errors.As(err, &rpcErr) || rpcErr.Code != errcatalog.Forbidden || !strings.Contains(string(rpcErr.Data), "not_issuer") {
		t.Fatalf("a named key's: %v", err)
	}
	other := access.WithPrincipal(context.Background(), access.Principal{Kind: access.OtherUser, UID: uint32(os.Getuid() + 1), HasUID: true})
	if _, err := h.Handle(other, req); !errors.As(err, &rpcErr) || rpcErr.Code != errcatalog.Forbidden {
		t.Fatalf("another user's: %v", err)
	}
	if n := len(b.Revocations().Mandates); n != 0 {
		t.Fatalf("refused statements kept: %d", n)
	}
	owner := access.WithPrincipal(context.Background(), access.Principal{Kind: access.SameUser, UID: uint32(os.Getuid()), HasUID: true})
	if _, err := h.Handle(owner, req); err != nil {
		t.Fatalf("the host's own user: %v", err)
	}
}
