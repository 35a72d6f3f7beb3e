package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/capmesh/capmesh/chp"
	"github.com/capmesh/capmesh/evidence"
	"github.com/capmesh/capmesh/evidence/postgres"
	"github.com/capmesh/capmesh/evidence/postgres/pgtest"
)

// TestMain gives the PostgreSQL benchmarks a server: CAPMESH_TEST_POSTGRES,
// or a private cluster started on first use (pgtest).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openPostgres opens a store on a fresh schema of the test server.
func openPostgres(b *testing.B) *postgres.Store {
	s, err := postgres.Open(context.Background(), pgtest.FreshDSN(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkCHPPostgres puts durable governed invocations with PostgreSQL
// evidence (Boundary.Invoke in process, 64 callers) beside their floor:
// bare pgx batched inserts of the same rows at the same durability. The
// floor's 64 callers hand the rows one invocation writes (copied from a
// governed invocation: its events and its recorded result) to one writer
// that inserts everything waiting in one statement — the same multi-row
// INSERT … SELECT FROM unnest into the same tables, synchronous_commit on
// — and answers each caller when it committed. Both run in one run, side
// by side, on one server.
//
//	go test ./internal/bench/ -run '^$' -bench 'CHPPostgres' -benchtime 3s -count 5
func BenchmarkCHPPostgres(b *testing.B) {
	events, result := invocationRows(b)
	for _, callers := range []int{64} {
		b.Run(fmt.Sprintf("callers%d/bare-pgx", callers), func(b *testing.B) {
			benchBarePgx(b, callers, events, result)
		})
		b.Run(fmt.Sprintf("callers%d/governed", callers), func(b *testing.B) {
			bd := governed(b, "postgres")
			ctx := context.Background()
			payload := json.RawMessage(`{"key":"k1"}`)
			measurePG(b, func() {
				split(b, callers, func(int) error {
					res, err := bd.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "kv.get", Payload: payload})
					if err == nil && !res.Success {
						err = fmt.Errorf("outcome %s", res.Outcome)
					}
					return err
				})
			})
		})
	}
}

// measurePG is measure adding the server's CPU time per operation
// (srv-cpu-µs/op) when the server is pgtest's private cluster.
func measurePG(b *testing.B, fn func()) {
	s0, err := pgtest.ServerCPU()
	measure(b, fn)
	if s1, err1 := pgtest.ServerCPU(); err == nil && err1 == nil {
		b.ReportMetric(float64((s1-s0).Microseconds())/float64(b.N), "srv-cpu-µs/op")
	}
}

// invocationRows returns the rows one governed kv.get invocation writes.
func invocationRows(b *testing.B) ([]evidence.Record, evidence.Result) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(b)
	s, err := postgres.Open(ctx, dsn, nil)
	if err != nil {
		b.Fatal(err)
	}
	bd := governedOn(b, s)
	res, err := bd.Invoke(ctx, &chp.InvocationEnvelope{CapabilityID: "kv.get", Payload: json.RawMessage(`{"key":"k1"}`)})
	if err != nil || !res.Success {
		b.Fatalf("invoke: %v %+v", err, res)
	}
	recs, err := s.Replay(ctx, evidence.Query{CorrelationID: res.Correlation.CorrelationID})
	if err != nil || len(recs) == 0 {
		b.Fatalf("replay: %v (%d records)", err, len(recs))
	}
	var r evidence.Result
	if err := s.Results(ctx, time.Time{}, func(x evidence.Result) bool { r = x; return false }); err != nil || r.InvocationID == "" {
		b.Fatalf("results: %v", err)
	}
	s.Close()
	return recs, r
}

// barePending is one invocation's rows waiting for the writer.
type barePending struct {
	corr string
	seq  int64 // of the first event
	done chan error
}

func benchBarePgx(b *testing.B, callers int, events []evidence.Record, result evidence.Result) {
	ctx := context.Background()
	dsn := pgtest.FreshDSN(b)
	s, err := postgres.Open(ctx, dsn, nil) // the same schema, created by the store
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	queue := make(chan barePending, callers)
	stop := make(chan struct{})
	go bareWriter(ctx, pool, queue, stop, events, result)
	defer close(stop)
	var seq, id atomic.Int64
	n := int64(len(events))
	measurePG(b, func() {
		split(b, callers, func(int) error {
			p := barePending{corr: fmt.Sprint("bare-", id.Add(1)), seq: seq.Add(n) - n + 1, done: make(chan error, 1)}
			queue <- p
			return <-p.done
		})
	})
}

// bareWriter inserts everything waiting in one statement, then answers.
func bareWriter(ctx context.Context, pool *pgxpool.Pool, queue chan barePending, stop chan struct{}, events []evidence.Record, result evidence.Result) {
	const insert = `
WITH r AS (
	INSERT INTO evidence_results (invocation_id, at, data)
	SELECT * FROM unnest($7::text[], $8::timestamptz[], $9::bytea[])
)
INSERT INTO evidence_events (seq, corr, prev_seq, type, hash, prev, data)
SELECT s, c, nullif(p, 0), t, h, v, d
FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $10::bytea[]) AS u(s, c, p, t, h, v, d)`
	var batch []barePending
	for {
		batch = batch[:0]
		select {
		case p := <-queue:
			batch = append(batch, p)
		case <-stop:
			return
		}
	drain:
		for {
			select {
			case p := <-queue:
				batch = append(batch, p)
			default:
				break drain
			}
		}
		var (
			seqs, prevs          []int64
			corrs, types, hashes []string
			prevHashes, ids      []string
			datas, results       [][]byte
			ats                  []time.Time
		)
		for _, p := range batch {
			for i, e := range events {
				prev := int64(0)
				if i > 0 {
					prev = p.seq + int64(i) - 1
				}
				seqs, prevs = append(seqs, p.seq+int64(i)), append(prevs, prev)
				corrs, types = append(corrs, p.corr), append(types, e.EventType)
				hashes, prevHashes, datas = append(hashes, e.ContentHash), append(prevHashes, e.PrevHash), append(datas, e.Data)
			}
			ids, ats, results = append(ids, p.corr), append(ats, result.At), append(results, result.Data)
		}
		_, err := pool.Exec(ctx, insert, seqs, corrs, prevs, types, hashes, prevHashes, ids, ats, results, datas)
		for _, p := range batch {
			p.done <- err
		}
	}
}
