package gateway

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/capmesh/capmesh/chp"
)

// TaskHost is one member of a verified task bundle: who contributed what.
type TaskHost struct {
	HostID     string `json:"host_id"`
	KeyID      string `json:"key_id,omitempty"`
	Assurance  string `json:"assurance"`
	Valid      bool   `json:"valid"`
	EventCount int    `json:"event_count"`
}

// TaskVerification is the verdict of VerifyTaskBundle, the shape of a
// gateway's federated /verify (chp-http-binding.md §4).
type TaskVerification struct {
	Mode          string          `json:"mode"`
	Valid         bool            `json:"valid"`
	Assurance     string          `json:"assurance"`
	CorrelationID string          `json:"correlation_id"`
	TaskRootHash  string          `json:"task_root_hash"`
	Checks        map[string]bool `json:"checks"`
	Hosts         []TaskHost      `json:"hosts"`
	Reason        string          `json:"reason,omitempty"`
}

// taskCheckOrder names the task-level checks in the order a reason lists
// their failures.
var taskCheckOrder = []string{"structure", "member_order", "task_root_hash", "members_valid",
	"correlation", "distinct_hosts", "causal_closure"}

// VerifyTaskBundle verifies a task bundle as a unit (chp-v0.2.md §8): its
// structure, canonical member order, task_root_hash, every member bundle
// (chp.VerifyBundle), every event under the task's correlation, distinct
// member hosts and causal closure. It does not check the causal order's
// acyclicity, a participation manifest or an aggregator signature; a
// bundle carrying an aggregator fails closed. The error is non-nil only
// when data is not a JSON object.
func VerifyTaskBundle(data []byte) (*TaskVerification, error) {
	var task struct {
		Kind          string            `json:"kind"`
		CorrelationID string            `json:"correlation_id"`
		Assurance     string            `json:"assurance"`
		TaskRootHash  string            `json:"task_root_hash"`
		Bundles       []json.RawMessage `json:"bundles"`
		Aggregator    json.RawMessage   `json:"aggregator"`
	}
	if err := json.Unmarshal(data, &task); err != nil {
		return nil, errors.New("gateway: a task bundle is a JSON object: " + err.Error())
	}
	v := &TaskVerification{Mode: "federated", CorrelationID: task.CorrelationID, TaskRootHash: task.TaskRootHash,
		Assurance: cmp.Or(task.Assurance, "none"), Checks: map[string]bool{}, Hosts: []TaskHost{}}
	v.Checks["structure"] = task.Kind == "task-bundle" && task.CorrelationID != "" && len(task.Bundles) > 0 &&
		(len(task.Aggregator) == 0 || string(task.Aggregator) == "null")
	type memberKey struct{ host, root string }
	var keys []memberKey
	h := sha256.New()
	v.Checks["members_valid"], v.Checks["correlation"] = true, true
	invocations, causes := map[string]bool{}, map[string]bool{}
	for _, raw := range task.Bundles {
		var m struct {
			HostID    string            `json:"host_id"`
			RootHash  string            `json:"root_hash"`
			Events    []json.RawMessage `json:"events"`
			Signature *struct {
				KeyID string `json:"key_id"`
			} `json:"signature"`
		}
		bv, err := chp.VerifyBundle(raw, nil)
		if err != nil || json.Unmarshal(raw, &m) != nil {
			v.Checks["members_valid"] = false
			keys = append(keys, memberKey{})
			continue
		}
		keys = append(keys, memberKey{m.HostID, m.RootHash})
		h.Write([]byte(m.RootHash + "\n"))
		th := TaskHost{HostID: m.HostID, Assurance: bv.Assurance, Valid: bv.Valid, EventCount: len(m.Events)}
		if m.Signature != nil {
			th.KeyID = m.Signature.KeyID
		}
		v.Hosts = append(v.Hosts, th)
		v.Checks["members_valid"] = v.Checks["members_valid"] && bv.Valid
		for _, e := range m.Events {
			var ev struct {
				InvocationID string `json:"invocation_id"`
				Correlation  struct {
					CorrelationID string  `json:"correlation_id"`
					CausationID   *string `json:"causation_id"`
				} `json:"correlation"`
			}
			if json.Unmarshal(e, &ev) != nil || ev.Correlation.CorrelationID != task.CorrelationID {
				v.Checks["correlation"] = false
			}
			invocations[ev.InvocationID] = true
			if c := ev.Correlation.CausationID; c != nil && *c != "" {
				causes[*c] = true
			}
		}
	}
	v.Checks["member_order"] = slices.IsSortedFunc(keys, func(a, b memberKey) int {
		return cmp.Or(strings.Compare(a.host, b.host), strings.Compare(a.root, b.root))
	})
	v.Checks["task_root_hash"] = task.TaskRootHash == hex.EncodeToString(h.Sum(nil))
	v.Checks["distinct_hosts"] = true
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.host] {
			v.Checks["distinct_hosts"] = false
		}
		seen[k.host] = true
	}
	v.Checks["causal_closure"] = true
	for c := range causes {
		if !invocations[c] {
			v.Checks["causal_closure"] = false
		}
	}
	v.Valid = true
	var failed []string
	for _, name := range taskCheckOrder {
		if !v.Checks[name] {
			v.Valid = false
			failed = append(failed, name)
		}
	}
	if !v.Valid {
		v.Reason = "task-bundle checks failed: " + strings.Join(failed, ", ")
	}
	return v, nil
}

// serveVerify answers GET /verify/{corr} with federated verification: the
// task bundle /export would assemble, verified as a unit; 503 naming the
// members it could not reach, never a partial verdict.
func (g *Gateway) serveVerify(w http.ResponseWriter, r *http.Request) {
	corr := r.PathValue("corr")
	bundles, unreachable := g.collectBundles(r.Context(), corr)
	if len(unreachable) > 0 {
		writeUnreachable(w, "federated_verify_unavailable", "members unreachable, no partial verdict: ", unreachable)
		return
	}
	if len(bundles) == 0 {
		httpError(w, http.StatusNotFound, "not_found", "no member holds evidence for "+corr)
		return
	}
	v, err := VerifyTaskBundle(taskBundle(corr, chp.FormatTime(g.cfg.Now()), bundles))
	if err != nil {
		httpError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, v)
}
