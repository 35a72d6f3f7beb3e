package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
)

// The routing evidence types of chp-v0.2.md §11: health transitions the
// gateway records on its own chain.
const (
	EventHostUnhealthy = "host_marked_unhealthy"
	EventHostHealthy   = "host_marked_healthy"
)

// gatewaySubject is the subject of the gateway's own health events.
func (g *Gateway) gatewaySubject() json.RawMessage {
	b, _ := json.Marshal(map[string]string{"id": g.cfg.HostID, "type": "system"})
	return b
}

// setHealth records a member's reachability and, on a transition only,
// the §11 event under the invocation's correlation.
func (g *Gateway) setHealth(ctx context.Context, inv *routed, u string, healthy bool, cause error) {
	g.mu.Lock()
	var m *member
	for _, x := range g.members {
		if x.url == u {
			m = x
		}
	}
	changed := m != nil && m.healthy != healthy
	hostID := ""
	if m != nil {
		m.healthy = healthy
		hostID = m.hostID
	}
	g.mu.Unlock()
	if !changed {
		return
	}
	typ, payload := EventHostHealthy, map[string]any{"host": u, "host_id": hostID}
	if !healthy {
		typ = EventHostUnhealthy
		payload["reason"] = cause.Error()
	}
	g.log.Warn("CHP gateway: member health changed", "member", u, "healthy", healthy)
	raw, err := json.Marshal(payload)
	if err == nil {
		_, err = g.record(ctx, inv, typ, "", nil, g.gatewaySubject(), raw)
	}
	if err != nil {
		g.log.Error("CHP gateway: health transition not recorded", "member", u, "err", err)
	}
}

// record appends one event of the gateway's own, under the routed
// invocation's correlation, hash-chained (legacy v1 scheme: the payload is
// hashed in clear), and returns its event id.
func (g *Gateway) record(ctx context.Context, inv *routed, typ string, outcome chp.Outcome, d *chp.DenialReason, subject, payload json.RawMessage) (string, error) {
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	ev := chp.EvidenceEvent{
		Assurance:    chp.DefaultAssurance(),
		CapabilityID: inv.env.CapabilityID,
		Correlation:  inv.env.Correlation,
		Denial:       d,
		EventID:      chp.NewID("evt"),
		EventType:    typ,
		HostID:       g.cfg.HostID,
		InvocationID: inv.env.InvocationID,
		Payload:      payload,
		Subject:      subject,
		Timestamp:    chp.FormatTime(g.cfg.Now()),
	}
	if outcome != "" {
		ev.Outcome = &outcome
	}
	seal := func(seq uint64, prev string) (string, []byte, error) {
		e := ev
		e.Sequence = seq
		if prev != "" {
			e.PrevHash = &prev
		}
		raw, err := json.Marshal(e)
		if err != nil {
			return "", nil, err
		}
		h, err := chp.EventContentHash(raw, prev)
		if err != nil {
			return "", nil, err
		}
		e.ContentHash = &h
		raw, err = json.Marshal(e)
		return h, raw, err
	}
	recs, err := g.store.Append(ctx, evidence.Pending{CorrelationID: inv.env.Correlation.CorrelationID, EventType: typ, Seal: seal})
	if err != nil {
		return "", fmt.Errorf("gateway evidence: %w", err)
	}
	if err := g.store.Sync(ctx, recs[len(recs)-1].Sequence); err != nil {
		return "", fmt.Errorf("gateway evidence: %w", err)
	}
	return ev.EventID, nil
}

// ownEvents returns the gateway's events of a correlation.
func (g *Gateway) ownEvents(ctx context.Context, corr string) ([]json.RawMessage, error) {
	recs, err := g.store.Replay(ctx, evidence.Query{CorrelationID: corr})
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		out[i] = append(json.RawMessage(nil), r.Data...)
	}
	return out, nil
}
