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
// the tables after a governed invocation: its compressed block and its
// recorded result, under a fresh random correlation id as the boundary
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

// pgRows is what one governed invocation stores: its evidence block (the
// span of sequences it covers and its body) and its result row.
type pgRows struct {
	span       int64
	block      []byte
	at         time.Time
	resultBody []byte
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
	err = conn.QueryRow(ctx, `SELECT last_seq - prev_seq, body FROM evidence_blocks`).Scan(&r.span, &r.block)
	if err == nil {
		err = conn.QueryRow(ctx, `SELECT at, body FROM evidence_result_log`).Scan(&r.at, &r.resultBody)
	}
	if err != nil {
		b.Fatalf("reading the invocation's rows (one block, one result): %v", err)
	}
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
INSERT INTO evidence_blocks (corr, prev_seq, last_seq, body)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[])`
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
		)
		for _, p := range batch {
			corrs, prevs, lasts = append(corrs, p.corr), append(prevs, 0), append(lasts, p.seq)
			bodies, ats, bodyR = append(bodies, rows.block), append(ats, rows.at), append(bodyR, rows.resultBody)
		}
		_, err := pool.Exec(ctx, insert, corrs, prevs, lasts, bodies, ats, bodyR)
		for _, p := range batch {
			p.done <- err
		}
	}
}
