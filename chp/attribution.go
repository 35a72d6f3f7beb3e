package chp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capmesh/capmesh/canonical"
)

// Attribution binding (docs/DECISIONS.md, "Binding that survives
// withholding").
//
// The upstream stable object covers neither subject, denial, error,
// sequence, capability_version nor the correlation beyond its id, so a
// forged "who acted" verifies upstream. capmesh binds them in the one stable
// member a host chooses freely, the event id:
//
//	event_id = "evt_" <32 random hex> IDBindMarker <AttributionDigest>
//
// AttributionDigest is the sha256 of the event without content_hash,
// event_id, payload and prev_hash — every member the envelope carries
// besides those the hash chain checks and the withholdable payload. The
// event id is in the stable object, so the binding is as strong as the
// content hash, survives withholding (§14 replaces only the payload), and an
// upstream verifier still passes.
//
// Events sealed by earlier versions bind under the payload member BindKey
// instead, which a withheld payload hides: those are reported bound only
// while their payload is disclosed.

// IDBindMarker separates an event id's unique part from the hex
// AttributionDigest that binds the event's other members.
const IDBindMarker = ".cmb1."

// Attribution states of one event, as EventAttribution.Attribution names
// them.
const (
	// AttributionBound: the event id binds every member (survives withholding).
	AttributionBound = "bound"
	// AttributionPayload: the legacy payload binding holds, on a disclosed
	// payload; withholding the payload would unbind the event.
	AttributionPayload = "bound-in-payload"
	// AttributionUnbound: nothing binds subject, denial, error or sequence
	// (a reference host's event, or a legacy event whose payload is withheld).
	AttributionUnbound = "unbound"
	// AttributionMismatch: the event carries a binding its members do not
	// match — they were edited after sealing.
	AttributionMismatch = "mismatch"
)

// EventAttribution says whether one event's attribution (subject, denial,
// error, sequence, version, correlation) is bound.
type EventAttribution struct {
	Index       int    `json:"index"`
	Sequence    string `json:"sequence,omitempty"`
	EventID     string `json:"event_id"`
	EventType   string `json:"event_type,omitempty"`
	Attribution string `json:"attribution"`
	Detail      string `json:"detail,omitempty"`
}

// attributionExcluded are the event members the attribution digest leaves
// out: the hash chain checks content_hash and prev_hash, event_id holds the
// digest, and the payload may be withheld (its commitment is bound).
var attributionExcluded = map[string]bool{"content_hash": true, "event_id": true, "payload": true, "prev_hash": true}

// AttributionDigest returns the lowercase hex sha256 of the chp-stable-v1
// form (floats rendered as Python does) of the encoded event without its
// content_hash, event_id, payload and prev_hash members.
func AttributionDigest(raw json.RawMessage) (string, error) {
	ev, err := decodeEvent(raw)
	if err != nil {
		return "", err
	}
	return attributionDigest(ev)
}

func attributionDigest(ev eventView) (string, error) {
	obj := canonical.Value{Kind: canonical.Object, Obj: make([]canonical.Member, 0, len(ev.Obj))}
	for _, m := range ev.Obj {
		if !attributionExcluded[m.Key] {
			obj.Obj = append(obj.Obj, m)
		}
	}
	return hashValue(canonical.PythonSortKeys, obj)
}

// BoundEventID returns the event id that binds an event: unique + IDBindMarker
// + digest.
func BoundEventID(unique, digest string) string { return unique + IDBindMarker + digest }

// idBinding returns the digest an event id claims; ok is false when the id
// claims none (not IDBindMarker followed by 64 lowercase hex digits at its
// end).
func idBinding(id string) (digest string, ok bool) {
	i := strings.LastIndex(id, IDBindMarker)
	if i <= 0 {
		return "", false
	}
	d := id[i+len(IDBindMarker):]
	if len(d) != 64 {
		return "", false
	}
	for _, c := range []byte(d) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return d, true
}

// attribution decides the attribution state of one decoded event.
func attribution(ev eventView, index int) EventAttribution {
	a := EventAttribution{Index: index, EventID: ev.text("event_id"), EventType: ev.text("event_type"), Attribution: AttributionUnbound}
	if s := member(ev.Value, "sequence"); s.Kind == canonical.Number {
		a.Sequence = s.Str
	}
	if want, ok := idBinding(a.EventID); ok {
		got, err := attributionDigest(ev)
		switch {
		case err != nil:
			a.Attribution, a.Detail = AttributionMismatch, err.Error()
		case got != want:
			a.Attribution, a.Detail = AttributionMismatch, "edited after sealing: the event id's attribution digest does not match"
		default:
			a.Attribution = AttributionBound
		}
	}
	// A legacy payload binding, where the payload is disclosed, is checked
	// too: it names the edited member.
	mism, has, err := checkBinding(ev)
	switch {
	case !has:
	case err != nil:
		a.Attribution, a.Detail = AttributionMismatch, err.Error()
	case len(mism) > 0:
		a.Attribution, a.Detail = AttributionMismatch, strings.Join(mism, ", ")+" edited after sealing"
	case a.Attribution == AttributionUnbound:
		a.Attribution = AttributionPayload
	}
	return a
}

// attributionProblem is the chain verifier's view of attribution: "" when
// the event's binding (if any) holds.
func attributionProblem(ev eventView) string {
	if a := attribution(ev, 0); a.Attribution == AttributionMismatch {
		return "bound fields edited: " + a.Detail
	}
	return ""
}

// String renders one event's state, as a check's detail names it.
func (a EventAttribution) String() string {
	s := fmt.Sprintf("event %d", a.Index)
	if a.Sequence != "" {
		s += " (sequence " + a.Sequence + ")"
	}
	s += ": " + a.Attribution
	if a.Detail != "" {
		s += ": " + a.Detail
	}
	return s
}

// CheckAttribution returns the attribution state of one encoded event.
func CheckAttribution(raw json.RawMessage) (EventAttribution, error) {
	ev, err := decodeEvent(raw)
	if err != nil {
		return EventAttribution{}, err
	}
	return attribution(ev, 0), nil
}
