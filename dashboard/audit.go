package dashboard

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/capmesh/capmesh/conformance"
	"github.com/capmesh/capmesh/endpoint"
)

// The audit matrix is `capmesh audit --all` on the machine the dashboard
// runs on: every socket of the biomeos directory (or Config.AuditDir). An
// audit probes every host, so one runs at a time and its report is kept
// for auditFresh; ?refresh=1 asks for a new one sooner.
const (
	auditFresh   = time.Minute
	auditTimeout = 2 * time.Minute
)

type auditCache struct {
	mu  sync.Mutex // held while an audit runs: one at a time
	at  time.Time
	rep *conformance.MachineReport
	err error
}

// auditRow is one host of the matrix.
type auditRow struct {
	Endpoint, Primal, Version, Announcement, CHP, Gap string
	Reachable                                         bool
	Level, Verified, Failed, Warnings                 int
}

type auditView struct {
	Dir      string
	At       string
	Duration string
	Rows     []auditRow
	Dead     []string
	Dangling []string
	Error    string
}

func (d *Dashboard) runAudit(ctx context.Context, refresh bool) (*conformance.MachineReport, time.Time, error) {
	c := &d.audit
	c.mu.Lock()
	defer c.mu.Unlock()
	now := d.cfg.Now()
	if c.rep != nil && !refresh && now.Sub(c.at) < auditFresh {
		return c.rep, c.at, nil
	}
	dir := d.cfg.AuditDir
	if dir == "" {
		sd, _, err := endpoint.SocketDir()
		if err != nil {
			return nil, now, err
		}
		dir = sd
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	rep, err := conformance.AuditAll(ctx, dir, nil)
	c.rep, c.at, c.err = rep, d.cfg.Now(), err
	return rep, c.at, err
}

func (d *Dashboard) auditPage(w http.ResponseWriter, r *http.Request) {
	rep, at, err := d.runAudit(r.Context(), r.URL.Query().Get("refresh") == "1")
	v := &auditView{At: at.UTC().Format(time.RFC3339)}
	if err != nil {
		v.Error = err.Error()
		d.render(w, r, http.StatusOK, "audit", "Audit", v)
		return
	}
	v.Dir, v.Duration, v.Dead, v.Dangling = rep.Dir, rep.Duration.Round(time.Millisecond).String(), rep.Dead, rep.Dangling
	for _, h := range rep.Hosts {
		row := auditRow{Endpoint: h.Endpoint, Primal: h.Primal, Version: h.Version, Announcement: h.Announcement,
			Reachable: h.Reachable, Level: h.Level, Verified: h.Verified, Failed: len(h.Failed()), Warnings: len(h.Warnings()), Gap: h.Gap(), CHP: "—"}
		if s := h.CHP; s != nil {
			switch {
			case s.NoCapabilities:
				row.CHP = s.Binding + ": no capabilities"
			case s.OK():
				row.CHP = s.Binding + ": ok"
			default:
				row.CHP = s.Binding + ": failing"
			}
		}
		v.Rows = append(v.Rows, row)
	}
	d.render(w, r, http.StatusOK, "audit", "Audit", v)
}
