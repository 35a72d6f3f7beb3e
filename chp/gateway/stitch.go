package gateway

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/capmesh/capmesh/chp"
)

// serveReplay answers a stitched replay: every member's events of the
// correlation plus the gateway's own, merged; members that could not
// contribute are disclosed in missing_hosts (their URLs) with partial:
// true (chp-http-binding.md §4b). query, when set, is the POST /replay
// body, forwarded as is.
func (g *Gateway) serveReplay(w http.ResponseWriter, r *http.Request, corr string, query []byte) {
	events, err := g.ownEvents(r.Context(), corr)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "evidence_unavailable", err.Error())
		return
	}
	missing := []string{}
	for _, m := range g.snapshot() {
		var status int
		var body []byte
		if query != nil {
			status, body, err = g.memberDo(r.Context(), http.MethodPost, m.url, "/replay", query)
		} else {
			status, body, err = g.memberDo(r.Context(), http.MethodGet, m.url, "/replay/"+url.PathEscape(corr), nil)
		}
		var res struct {
			Events []json.RawMessage `json:"events"`
		}
		switch {
		case err != nil:
			g.log.Debug("CHP gateway: member missing from replay", "member", m.url, "err", err)
			missing = append(missing, m.url)
		case status == http.StatusNotFound:
			// The member holds nothing for the correlation.
		case status != http.StatusOK || json.Unmarshal(body, &res) != nil:
			missing = append(missing, m.url)
		default:
			events = append(events, res.Events...)
		}
	}
	events = mergeTimeline(events)
	writeJSON(w, http.StatusOK, map[string]any{
		"correlation_id": corr,
		"events":         events,
		"event_count":    len(events),
		"replayed_at":    chp.FormatTime(g.cfg.Now()),
		"truncated":      false,
		"partial":        len(missing) > 0,
		"missing_hosts":  missing,
	})
}

// mergeTimeline orders events from several hosts by timestamp, then host
// id, then per-host sequence — each host's own order kept, the hosts
// interleaved by time.
func mergeTimeline(events []json.RawMessage) []json.RawMessage {
	type key struct {
		ts, host string
		seq      uint64
	}
	keys := make([]key, len(events))
	for i := range events {
		var k struct {
			Timestamp string `json:"timestamp"`
			HostID    string `json:"host_id"`
			Sequence  uint64 `json:"sequence"`
		}
		_ = json.Unmarshal(events[i], &k)
		keys[i] = key{k.Timestamp, k.HostID, k.Sequence}
	}
	idx := make([]int, len(events))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ka, kb := keys[a], keys[b]
		return cmp.Or(cmp.Compare(ka.ts, kb.ts), cmp.Compare(ka.host, kb.host), cmp.Compare(ka.seq, kb.seq))
	})
	out := make([]json.RawMessage, len(events))
	for i, j := range idx {
		out[i] = events[j]
	}
	return out
}

// memberBundle is what the task bundle reads of a member's export.
type memberBundle struct {
	raw       json.RawMessage
	HostID    string            `json:"host_id"`
	RootHash  string            `json:"root_hash"`
	Assurance string            `json:"assurance"`
	Events    []json.RawMessage `json:"events"`
}

// serveExport answers GET /export/{corr}: the members' bundles of the
// correlation assembled into a task bundle (chp-v0.2.md §8), members with
// no events left out; 503 naming every member it could not reach.
func (g *Gateway) serveExport(w http.ResponseWriter, r *http.Request) {
	corr := r.PathValue("corr")
	bundles, unreachable := g.collectBundles(r.Context(), corr)
	if len(unreachable) > 0 {
		writeUnreachable(w, "export_incomplete", "members unreachable, a partial task bundle is refused: ", unreachable)
		return
	}
	if len(bundles) == 0 {
		httpError(w, http.StatusNotFound, "not_found", "no member holds evidence for "+corr)
		return
	}
	writeRaw(w, http.StatusOK, taskBundle(corr, chp.FormatTime(g.cfg.Now()), bundles))
}

// collectBundles fetches every member's export of corr.
func (g *Gateway) collectBundles(ctx context.Context, corr string) ([]memberBundle, []string) {
	var bundles []memberBundle
	var unreachable []string
	for _, m := range g.snapshot() {
		status, body, err := g.memberDo(ctx, http.MethodGet, m.url, "/export/"+url.PathEscape(corr), nil)
		var b memberBundle
		switch {
		case err != nil:
			unreachable = append(unreachable, m.url)
		case status == http.StatusNotFound:
		case status != http.StatusOK || json.Unmarshal(body, &b) != nil || b.HostID == "":
			unreachable = append(unreachable, m.url)
		case len(b.Events) > 0:
			b.raw = bytes.TrimSpace(body)
			bundles = append(bundles, b)
		}
	}
	return bundles, unreachable
}

// taskBundle assembles members into a task bundle: members byte for byte,
// sorted by (host_id, root_hash), task_root_hash over their root hashes,
// assurance the lowest member tier. Keys are written sorted.
func taskBundle(corr, createdAt string, members []memberBundle) []byte {
	slices.SortFunc(members, func(a, b memberBundle) int {
		return cmp.Or(strings.Compare(a.HostID, b.HostID), strings.Compare(a.RootHash, b.RootHash))
	})
	h := sha256.New()
	rank := map[string]int{"none": 0, "hash-chain": 1, "signed": 2}
	tiers := []string{"none", "hash-chain", "signed"}
	lowest := 2
	for _, m := range members {
		h.Write([]byte(m.RootHash))
		h.Write([]byte{'\n'})
		t, ok := rank[cmp.Or(m.Assurance, "none")]
		if !ok {
			t = 0
		}
		lowest = min(lowest, t)
	}
	str := func(s string) []byte { b, _ := json.Marshal(s); return b }
	var b bytes.Buffer
	b.WriteString(`{"assurance":`)
	b.Write(str(tiers[lowest]))
	b.WriteString(`,"bundles":[`)
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m.raw)
	}
	b.WriteString(`],"canonicalization":`)
	b.Write(str(chp.Canonicalization))
	b.WriteString(`,"correlation_id":`)
	b.Write(str(corr))
	b.WriteString(`,"created_at":`)
	b.Write(str(createdAt))
	b.WriteString(`,"kind":"task-bundle","protocol_version":`)
	b.Write(str(chp.ProtocolVersion))
	b.WriteString(`,"task_root_hash":`)
	b.Write(str(hex.EncodeToString(h.Sum(nil))))
	b.WriteByte('}')
	return b.Bytes()
}

// writeUnreachable answers 503 naming the members that could not be reached.
func writeUnreachable(w http.ResponseWriter, code, msg string, unreachable []string) {
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{
		"code":    code,
		"message": msg + strings.Join(unreachable, ", "),
		"details": map[string]any{"unreachable_hosts": unreachable},
	}})
}
