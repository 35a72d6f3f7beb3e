package logstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/capmesh/capmesh/evidence/logstore/internal/format"
)

// ErrDamaged is the error Open returns (wrapped in a *DamageError) for a
// log with damaged bytes before records that verify: acknowledged evidence
// may be behind the damage, so the store refuses to serve as if complete.
var ErrDamaged = errors.New("logstore: evidence log is damaged")

// DamageError reports why Open refused a damaged log. The file is left as
// it was; Check describes it and Repair keeps every record that verifies.
type DamageError struct {
	Path    string
	Damaged []Damage
	Tail    *Tail
}

// Error implements error.
func (e *DamageError) Error() string {
	d := e.Damaged[0]
	var b strings.Builder
	fmt.Fprintf(&b, "logstore: %s is damaged: %d run(s) of damaged bytes with records that verify after them (first at offset %d, %d bytes, %s",
		e.Path, len(e.Damaged), d.Offset, d.Length, d.Reason)
	switch m := d.Missing(); {
	case m == 1:
		fmt.Fprintf(&b, ", sequence %d lost", d.After+1)
	case m > 1:
		fmt.Fprintf(&b, ", sequences %d-%d lost", d.After+1, d.Next-1)
	}
	fmt.Fprintf(&b, "); refusing to open it: run `capmesh evidence check %s` to see what is damaged and what is still provable, and `capmesh evidence check --repair %s` to move the damaged bytes aside and keep every record that verifies",
		filepath.Dir(e.Path), filepath.Dir(e.Path))
	return b.String()
}

// Unwrap makes errors.Is(err, ErrDamaged) hold.
func (e *DamageError) Unwrap() error { return ErrDamaged }

// Gap is a gap record: an earlier Repair moved damaged records aside here,
// and the evidence sequence resumes at Next.
type Gap struct {
	Offset int64     `json:"offset"`
	After  uint64    `json:"after"`
	Next   uint64    `json:"next"`
	At     time.Time `json:"at"`
	Note   string    `json:"note"`
}

// ChainBreak is a record whose previous hash is not the content hash of the
// previous record of its correlation that verifies (or, for the first one
// found, not empty): a link of the chain is missing, so the correlation's
// records from Sequence on are not provable from its genesis.
type ChainBreak struct {
	CorrelationID string `json:"correlation_id"`
	Sequence      uint64 `json:"sequence"`
}

// Report is what Check (or Repair) found in a store's log.
type Report struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// End is where the last record that verifies ends.
	End int64 `json:"end"`
	// Records, Results and Correlations count what verifies.
	Records       int    `json:"records"`
	Results       int    `json:"results"`
	Correlations  int    `json:"correlations"`
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
	// Damaged lists the damaged runs (each followed by records that verify).
	Damaged []Damage `json:"damaged"`
	// Tail is a torn tail (never acknowledged when a crash left it).
	Tail *Tail `json:"torn_tail,omitempty"`
	// Gaps are the losses an earlier repair recorded.
	Gaps []Gap `json:"gaps,omitempty"`
	// Broken lists, per correlation, the first record whose chain link is
	// missing; every other correlation is complete from its genesis.
	Broken []ChainBreak `json:"broken_chains,omitempty"`
	// Preserved are the files Repair moved damaged bytes to.
	Preserved []string `json:"preserved,omitempty"`
	// Repaired says Repair rewrote the log.
	Repaired bool `json:"repaired"`
}

// IsDamaged reports whether the log holds damage that makes Open refuse it.
func (r *Report) IsDamaged() bool { return len(r.Damaged) > 0 }

// openLocked opens the log of dir and takes its lock.
func openLocked(dir string, flag int) (*os.File, string, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, path, fmt.Errorf("logstore: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, path, fmt.Errorf("logstore: %s is in use by another process: %w", path, err)
	}
	return f, path, nil
}

// Check reads the log in dir without changing it and reports what verifies,
// what is damaged (with what the damaged records claim to be) and which
// correlations' chains miss a link. It takes the store's lock: a store that
// a running host has open is not checked.
func Check(dir string) (*Report, error) {
	f, path, err := openLocked(dir, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	return check(f, st.Size(), path)
}

// check scans the size bytes of the log f into a report.
func check(f io.ReaderAt, size int64, path string) (*Report, error) {
	r := &Report{Path: path, Size: size, Damaged: []Damage{}}
	heads, broken := map[string]string{}, map[string]bool{}
	next := uint64(1)
	res, err := scanLog(f, size, func(fr *frame) error {
		for i := range fr.items {
			switch it := &fr.items[i]; it.kind {
			case kindRecord:
				rec := &it.rec
				if r.Records == 0 {
					r.FirstSequence = rec.Sequence
				}
				r.Records++
				r.LastSequence = rec.Sequence
				if rec.PrevHash != heads[rec.CorrelationID] && !broken[rec.CorrelationID] { // the first break
					broken[rec.CorrelationID] = true
					r.Broken = append(r.Broken, ChainBreak{CorrelationID: rec.CorrelationID, Sequence: rec.Sequence})
				}
				heads[rec.CorrelationID] = rec.ContentHash
				next = rec.Sequence + 1
			case kindResult:
				r.Results++
			case kindGap:
				r.Gaps = append(r.Gaps, Gap{Offset: fr.off, After: next - 1, Next: it.next, At: time.UnixMicro(it.at).UTC(), Note: it.note})
				next = it.next
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("logstore: reading %s: %w", path, err)
	}
	r.End, r.Tail, r.Correlations = res.end, res.tail, len(heads)
	r.Damaged = append(r.Damaged, res.damaged...)
	for i := range r.Damaged {
		r.Damaged[i].Claims = claims(f, size, r.Damaged[i])
	}
	return r, nil
}

// maxClaims bounds the claims listed for one damaged run.
const maxClaims = 100

// claims walks the damaged run d by its frame headers, as far as they
// stay inside it, and returns what each record's bytes say it is (the
// records of a damaged block, if it still decompresses, at the block's
// offset).
func claims(f io.ReaderAt, total int64, d Damage) []Claim {
	sc := &scanner{r: f, total: total}
	var out []Claim
	for off := d.Offset; off+format.HeaderSize+format.MinEvidenceBody <= d.Offset+d.Length && len(out) < maxClaims; {
		h, err := sc.bytes(off, format.HeaderSize)
		if err != nil {
			break
		}
		n := int64(h[0])<<24 | int64(h[1])<<16 | int64(h[2])<<8 | int64(h[3])
		if n < format.MinEvidenceBody || off+format.HeaderSize+n > d.Offset+d.Length {
			break
		}
		raw, err := sc.bytes(off, int(format.HeaderSize+n))
		if err != nil {
			break
		}
		body := raw[format.HeaderSize:]
		if format.IsBlock(body) {
			if inner, err := format.DecodeBlock(body); err == nil {
				format.Records(inner, func(_ int, rec []byte, why string) bool {
					if why != "" || len(out) >= maxClaims {
						return false
					}
					c, ok := claim(rec)
					if ok {
						c.Offset = off
						out = append(out, c)
					}
					return ok
				})
			}
		} else if c, ok := claim(raw); ok {
			c.Offset = off
			out = append(out, c)
		} else {
			break
		}
		off += format.HeaderSize + n
	}
	return out
}

// claim is what the record rec (header and body) says it is.
func claim(rec []byte) (Claim, bool) {
	body := rec[format.HeaderSize:]
	if format.IsSpecial(body) {
		return Claim{}, true
	}
	r, err := format.DecodeRecord(body)
	if err != nil {
		return Claim{}, false
	}
	return Claim{Sequence: r.Sequence, CorrelationID: r.CorrelationID, EventType: r.EventType}, true
}

// preserve writes the bytes of r to a new file named name in dir (name.1,
// name.2, … if it exists: nothing is ever overwritten) and returns its
// path.
func preserve(dir, name string, r io.Reader, sync bool) (string, error) {
	path := filepath.Join(dir, name)
	var f *os.File
	var err error
	for i := 1; ; i++ {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			break
		}
		path = filepath.Join(dir, fmt.Sprintf("%s.%d", name, i))
	}
	if err != nil {
		return "", fmt.Errorf("logstore: preserving damaged bytes: %w", err)
	}
	_, err = io.Copy(f, r)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("logstore: preserving damaged bytes in %s: %w", path, err)
	}
	return path, nil
}

// Repair rewrites the log in dir keeping every record that verifies, in
// order. The bytes of each damaged run are first moved aside into
// evidence.log.damaged-<offset>, a torn tail's into evidence.log.torn-<offset>
// (nothing is deleted); where evidence sequences were lost a gap record
// says so, and the evidence sequence resumes after it. The new log replaces
// the old one with an atomic rename. A log without damage or torn tail is
// left alone. Like Open, Repair takes the store's lock; opts.NoSync skips
// the fsyncs (tests only).
func Repair(dir string, opts *Options) (*Report, error) {
	f, path, err := openLocked(dir, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doSync := opts == nil || !opts.NoSync
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	r, err := check(f, st.Size(), path)
	if err != nil || (len(r.Damaged) == 0 && r.Tail == nil) {
		return r, err
	}
	// Move the damaged bytes aside first: once the new log is in place
	// they exist nowhere else.
	notes := map[uint64]string{} // sequence after a loss → note
	for _, d := range r.Damaged {
		var kept string
		if d.Length > 0 {
			if kept, err = preserve(dir, fmt.Sprintf("%s.damaged-%d", FileName, d.Offset), io.NewSectionReader(f, d.Offset, d.Length), doSync); err != nil {
				return r, err
			}
			r.Preserved = append(r.Preserved, kept)
		}
		switch {
		case d.Missing() == 0:
		case kept == "":
			notes[d.Next] = fmt.Sprintf("repair: sequences %d-%d missing, no bytes in their place", d.After+1, d.Next-1)
		default:
			notes[d.Next] = fmt.Sprintf("repair: sequences %d-%d missing; the damaged bytes in their place were moved to %s", d.After+1, d.Next-1, filepath.Base(kept))
		}
	}
	if t := r.Tail; t != nil {
		kept, err := preserve(dir, fmt.Sprintf("%s.torn-%d", FileName, t.Offset), io.NewSectionReader(f, t.Offset, t.Length), doSync)
		if err != nil {
			return r, err
		}
		r.Preserved = append(r.Preserved, kept)
	}
	if doSync { // the preserved files exist before the log that drops their bytes
		if err := syncDir(dir); err != nil {
			return r, err
		}
	}
	if err := rewrite(f, st.Size(), path, notes, doSync); err != nil {
		return r, err
	}
	if doSync {
		if err := syncDir(dir); err != nil {
			return r, err
		}
	}
	r.Repaired = true
	return r, nil
}

// rewrite writes the repaired log (see repaired) into a new file and
// renames it over path.
func rewrite(f io.ReaderAt, size int64, path string, notes map[uint64]string, doSync bool) error {
	tmp := path + ".repair"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	defer out.Close()
	err = repaired(f, size, notes, out)
	if err == nil && doSync {
		err = out.Sync()
	}
	if err != nil {
		return fmt.Errorf("logstore: writing the repaired log: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	return nil
}

// repaired writes to out the records of the log f that verify, in order,
// with a gap record before each evidence record whose sequence does not
// follow the previous one (its note from notes, keyed by that sequence).
func repaired(f io.ReaderAt, size int64, notes map[uint64]string, out io.Writer) error {
	w := newBufWriter(out)
	next := uint64(1)
	now := time.Now()
	_, err := scanLog(f, size, func(fr *frame) error {
		for i := range fr.items {
			switch it := &fr.items[i]; it.kind {
			case kindRecord:
				if it.rec.Sequence != next {
					note := notes[it.rec.Sequence]
					if note == "" {
						note = fmt.Sprintf("repair: sequences %d-%d missing", next, it.rec.Sequence-1)
					}
					w.write(format.AppendGap(nil, it.rec.Sequence, now, note))
				}
				next = it.rec.Sequence + 1
			case kindGap:
				next = it.next
			}
		}
		w.write(fr.raw)
		return w.err
	})
	if err != nil {
		return err
	}
	return w.flush()
}

// bufWriter batches writes, keeping the first error.
type bufWriter struct {
	f   io.Writer
	buf []byte
	err error
}

func newBufWriter(f io.Writer) *bufWriter { return &bufWriter{f: f, buf: make([]byte, 0, 64<<10)} }

func (w *bufWriter) write(b []byte) {
	if len(w.buf)+len(b) > cap(w.buf) {
		_ = w.flush()
	}
	if len(b) > cap(w.buf) {
		if w.err == nil {
			_, w.err = w.f.Write(b)
		}
		return
	}
	w.buf = append(w.buf, b...)
}

func (w *bufWriter) flush() error {
	if w.err == nil && len(w.buf) > 0 {
		_, w.err = w.f.Write(w.buf)
	}
	w.buf = w.buf[:0]
	return w.err
}
