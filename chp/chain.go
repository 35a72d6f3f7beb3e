package chp

import "fmt"

// StoredEvent is one evidence event as a store returns it: the encoded event
// and the hashes the store recorded beside it when the event was appended.
type StoredEvent struct {
	Sequence    uint64
	Data        []byte
	ContentHash string
	PrevHash    string // "" for the first event of a correlation
}

// VerifyChain recomputes the hash chain of one correlation's events, given
// in sequence order (chp-http-binding.md §4, the host's /verify): every
// content hash, every prev_hash link — each checked both in the event and
// against what the store recorded — every payload commitment and capmesh's
// attribution binding. An event without a content_hash is counted unverified. The
// first problem sets FirstBrokenSequence and Reason; Problems lists all.
func VerifyChain(correlationID string, events []StoredEvent) *ChainVerification {
	v := &ChainVerification{CorrelationID: correlationID, EventCount: len(events), Valid: true}
	prev := ""
	for _, r := range events {
		problem := ""
		ev, err := decodeEvent(r.Data)
		switch {
		case err != nil:
			problem = "undecodable event: " + err.Error()
		case ev.text("content_hash") == "":
			v.UnverifiedCount++
			problem = "event has no content_hash"
		default:
			problem = chainProblem(ev, r, prev)
		}
		if problem != "" {
			if v.Valid {
				seq := r.Sequence
				v.FirstBrokenSequence = &seq
				v.Reason = fmt.Sprintf("sequence %d: %s", r.Sequence, problem)
			}
			v.Valid = false
			v.Problems = append(v.Problems, fmt.Sprintf("sequence %d: %s", r.Sequence, problem))
		} else {
			v.VerifiedCount++
		}
		prev = r.ContentHash
	}
	return v
}

// chainProblem checks one decoded event that carries a content hash against
// its predecessor's hash prev; "" means it verifies.
func chainProblem(ev eventView, r StoredEvent, prev string) string {
	stored := ev.text("content_hash")
	s, err := ev.stable()
	switch {
	case err != nil:
		return err.Error()
	case ev.text("prev_hash") != prev || r.PrevHash != prev:
		return "prev_hash does not link to the previous event"
	case s.contentHash(prev) != stored || r.ContentHash != stored:
		return "content_hash mismatch"
	case ev.text("hash_scheme") == EventHashV2 && !ev.payloadMatchesCommitment():
		return "payload does not match payload_commitment"
	}
	return attributionProblem(ev)
}
