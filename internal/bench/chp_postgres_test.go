package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/capmesh/capmesh/chp"
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
// floor's 64 callers hand the rows one invocation writes (read back from
// the tables after a governed invocation: its compressed block, carrying
// its recorded result, under a fresh random correlation id as the boundary
// draws one) to one writer that inserts everything waiting in one
// statement — the same multi-row INSERT … SELECT FROM unnest into the
// same tables, synchronous_commit on — and answers each caller when it
// committed. Both run in one run, side by side, on one server.
//
//	go test ./internal/bench/ -run '^$' -bench 'CHPPostgres' -benchtime 3s -count 5
func BenchmarkCHPPostgres(b *testing.B) {
	rows := invocationRows(b)
	for _, callers := range []int{64} {
		b.Run(fmt.Sprintf("callers%d/bare-pgx", callers), func(b *testing.B) {
			benchBarePgx(b, callers, rows)
		})
		b.Run(fmt.Sprintf("callers%d/governed", callers), func(b *testing.B) {
			ctx := context.Background()
			dsn := pgtest.FreshDSN(b)
			s, err := postgres.Open(ctx, dsn, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			bd := governedOn(b, s)
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
			b.StopTimer()
			reportLoneResults(b, dsn)
		})
	}
}

// reportLoneResults reports the share of governed invocations whose result
// did not ride with its block (lone-results/inv): each is one row and one
// compression more than the floor's rows.
func reportLoneResults(b *testing.B, dsn string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var lone, carried int64
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM evidence_result_log),
		(SELECT count(*) FROM evidence_blocks WHERE res_at IS NOT NULL)`).Scan(&lone, &carried)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(lone)/float64(lone+carried), "lone-results/inv")
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

// pgRows is what one governed invocation stores: its evidence block (the
// span of sequences it covers, its body, and res_at when the block carries
// the invocation's result) and its result rows, if the result did not
// ride with the block.
type pgRows struct {
	span    int64
	block   []byte
	resAt   pgtype.Timestamptz
	ats     []time.Time
	results [][]byte
}

// invocationRows returns the rows one governed kv.get invocation writes,
// read back from the tables.
func invocationRows(b *testing.B) pgRows {
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
	s.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var r pgRows
	err = conn.QueryRow(ctx, `SELECT last_seq - prev_seq, body, res_at FROM evidence_blocks`).Scan(&r.span, &r.block, &r.resAt)
	if err != nil {
		b.Fatalf("reading the invocation's block (one): %v", err)
	}
	rows, err := conn.Query(ctx, `SELECT at, body FROM evidence_result_log`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var at time.Time
		var body []byte
		if err := rows.Scan(&at, &body); err != nil {
			b.Fatal(err)
		}
		r.ats, r.results = append(r.ats, at), append(r.results, body)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	b.Logf("one invocation: a block of %d B (carrying its result: %v), %d result rows", len(r.block), r.resAt.Valid, len(r.results))
	return r
}

// barePending is one invocation's rows waiting for the writer.
type barePending struct {
	corr string
	seq  int64 // the block's last sequence
	done chan error
}

func benchBarePgx(b *testing.B, callers int, rows pgRows) {
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
	go bareWriter(ctx, pool, queue, stop, rows)
	defer close(stop)
	var seq atomic.Int64
	measurePG(b, func() {
		split(b, callers, func(int) error {
			p := barePending{corr: chp.NewID("corr"), seq: seq.Add(rows.span), done: make(chan error, 1)}
			queue <- p
			return <-p.done
		})
	})
}

// bareWriter inserts everything waiting in one statement, then answers.
func bareWriter(ctx context.Context, pool *pgxpool.Pool, queue chan barePending, stop chan struct{}, rows pgRows) {
	const insert = `
WITH r AS (
	INSERT INTO evidence_result_log (at, body)
	SELECT * FROM unnest($5::timestamptz[], $6::bytea[])
)
INSERT INTO evidence_blocks (corr, prev_seq, last_seq, body, res_at)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[], $7::timestamptz[])`
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
			corrs         []string
			prevs, lasts  []int64
			bodies, bodyR [][]byte
			ats           []time.Time
			resAts        []pgtype.Timestamptz
		)
		for _, p := range batch {
			corrs, prevs, lasts = append(corrs, p.corr), append(prevs, 0), append(lasts, p.seq)
			bodies, resAts = append(bodies, rows.block), append(resAts, rows.resAt)
			ats, bodyR = append(ats, rows.ats...), append(bodyR, rows.results...)
		}
		_, err := pool.Exec(ctx, insert, corrs, prevs, lasts, bodies, ats, bodyR, resAts)
		for _, p := range batch {
			p.done <- err
		}
	}
}
