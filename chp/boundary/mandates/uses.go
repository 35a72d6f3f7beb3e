package mandates

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Use counts of capped mandates survive a restart when Config.UsesFile
// is set: every counted use is a JSON line appended (and synced) before the
// invocation proceeds, and the file is reloaded — without the uses of
// expired mandates — by Open.

// useRecord is one line of the uses file: a use, or (no InvocationID) a
// mandate seen at gate 5, whose issuer may revoke it here.
type useRecord struct {
	MandateID    string    `json:"mandate_id"`
	PrincipalKey string    `json:"principal_key"`
	InvocationID string    `json:"invocation_id"`
	Until        time.Time `json:"valid_until"`
}

// loadUses reads the uses file at path, keeps the uses (and the seen
// mandates) of mandates still valid at now, and rewrites the file with only those (so it does not grow
// with expired grants). A line that does not parse — a torn last write — is
// dropped.
func (ms *State) loadUses(path string, now time.Time) error {
	ms.usesPath = path
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var kept bytes.Buffer
	dropped := 0
	for line := range bytes.Lines(data) {
		var r useRecord
		if json.Unmarshal(line, &r) != nil || r.MandateID == "" {
			dropped++
			continue
		}
		if now.After(r.Until) {
			dropped++
			continue
		}
		k := mandateKey{r.MandateID, r.PrincipalKey}
		ms.remember(k, r.Until, now)
		if r.InvocationID != "" { // else a mandate seen at gate 5, without a use
			ms.use(k, r.Until).ids[r.InvocationID] = struct{}{}
		}
		kept.Write(bytes.TrimRight(line, "\n"))
		kept.WriteByte('\n')
	}
	if dropped == 0 {
		return nil
	}
	return writeFileAtomic(path, kept.Bytes())
}

// use returns the counter of k, made with until when new (ms.mu held).
func (ms *State) use(k mandateKey, until time.Time) *mandateUses {
	if u := ms.uses[k]; u != nil {
		return u
	}
	if ms.uses == nil {
		ms.uses = make(map[mandateKey]*mandateUses)
	}
	u := &mandateUses{ids: make(map[string]struct{}), until: until}
	ms.uses[k] = u
	return u
}

// persistUses appends the records of one counted invocation (ms.mu held).
func (ms *State) persistUses(recs []useRecord) error {
	if ms.usesPath == "" || len(recs) == 0 {
		return nil
	}
	var buf []byte
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		buf = append(append(buf, line...), '\n')
	}
	f, err := os.OpenFile(ms.usesPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(buf); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeFileAtomic replaces path with data (mode 0600) through a synced
// temporary file and a rename.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
