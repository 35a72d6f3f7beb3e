package callcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/capmesh/capmesh/cmd/capmesh/internal/cli"

	"github.com/capmesh/capmesh/endpoint"
)

// callKey is the credential `capmesh call` presents: --key, else
// $CHP_HOST_API_KEY (the variable a keyed host reads, so a shell that
// configures a host can call it). On JSON-RPC it travels as
// params._meta.chp_key, which every binding of a capmesh host reads
// (docs/access.md); on the CHP HTTP binding as X-CHP-Key.
func callKey(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("CHP_HOST_API_KEY")
}

// withKey returns params with _meta.chp_key set (params nil: an object
// holding only that). Positional (array) params cannot carry it.
func withKey(params json.RawMessage, key string) (json.RawMessage, error) {
	if key == "" {
		return params, nil
	}
	obj := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(params)) > 0 {
		if err := json.Unmarshal(params, &obj); err != nil || obj == nil {
			return nil, cli.UsageErrorf("--key needs object params (it travels as params._meta.chp_key)")
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := obj["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return nil, cli.UsageErrorf("params._meta must be an object")
		}
	}
	k, _ := json.Marshal(key)
	meta["chp_key"] = k
	var err error
	if obj["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// callCHP invokes capability on a host's CHP HTTP binding (POST
// {base}/invoke with an InvocationEnvelope), the way the upstream
// reference hosts are called: they serve no JSON-RPC bridge. The
// InvocationResult is printed whatever its outcome; exit 1 unless it
// succeeded.
func callCHP(ctx context.Context, a cli.Env, addr endpoint.Address, capability string, params json.RawMessage, key string) error {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if params[0] != '{' {
		return cli.UsageErrorf("--chp needs object params (the envelope's payload)")
	}
	env, err := json.Marshal(map[string]any{"capability_id": capability, "payload": params})
	if err != nil {
		return err
	}
	base := addr.Scheme + "://" + addr.Host
	if p := strings.TrimSuffix(addr.Path, "/jsonrpc"); p != "" && p != "/" {
		base += strings.TrimSuffix(p, "/")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/invoke", bytes.NewReader(env))
	if err != nil {
		return cli.UsageErrorf("--http: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-CHP-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return cli.NetErr(&endpoint.DialError{Addr: addr, Err: err})
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return cli.NetErr(&endpoint.DialError{Addr: addr, Err: err})
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(a.Stderr(), "HTTP %d: %s\n", resp.StatusCode, strings.TrimSpace(string(body)))
		return cli.SilentExit(cli.ExitFailure)
	}
	fmt.Fprintln(a.Stdout(), cli.IndentJSON(body))
	var res struct {
		Outcome string `json:"outcome"`
	}
	if json.Unmarshal(body, &res) != nil || res.Outcome != "success" {
		return cli.SilentExit(cli.ExitFailure)
	}
	return nil
}
