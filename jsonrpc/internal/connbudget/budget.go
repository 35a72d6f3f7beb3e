// Package connbudget is the connection budget of package jsonrpc's
// Server: MaxConns slots shared by every listener, lowered to fit the
// process's file descriptor limit, of which an owner reserve only the
// server's own user may take; and the graceful close of a connection the
// server refuses.
package connbudget

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// fdReserve is what the budget leaves of the process's file descriptor
// limit for listeners, stores, logs and outgoing connections.
const fdReserve = 128

// maxLingering bounds the refused connections that linger at once: each
// holds a descriptor for up to half a second, and a flood of connections
// over the budget must not take the descriptors the budget leaves free.
const maxLingering = 32

// Budget counts the connections holding a slot. It is safe for concurrent
// use.
type Budget struct {
	n       atomic.Int64 // connections holding a slot, all listeners
	limit   int64        // MaxConns, lowered to fit the fd limit
	reserve int64        // slots of limit only owner peers may take
	// lingering counts refused connections being closed gracefully.
	lingering atomic.Int32
}

// New returns a budget of maxConns slots, of which ownerReserve (at most
// half) only owners may take. When maxConns does not fit the process's
// file descriptor limit (nofile, less fdReserve) it is lowered, and
// lowered reports it.
func New(maxConns, ownerReserve int) (b *Budget, nofile int64, lowered bool) {
	b = &Budget{limit: int64(maxConns)}
	if fds := fdLimit(); fds > 0 && b.limit > fds-fdReserve {
		b.limit = max(fds-fdReserve, 2)
		nofile, lowered = fds, true
	}
	b.reserve = min(int64(ownerReserve), b.limit/2)
	return b, nofile, lowered
}

// Limit is the number of slots.
func (b *Budget) Limit() int64 { return b.limit }

// Admit takes a slot, or reports false when the slots of the peer's class
// are spent: non-owner peers may not take the owner reserve.
func (b *Budget) Admit(owner bool) bool {
	limit := b.limit
	if !owner {
		limit -= b.reserve
	}
	for {
		n := b.n.Load()
		if n >= limit {
			return false
		}
		if b.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release frees a slot taken by Admit.
func (b *Budget) Release() { b.n.Add(-1) }

// Refuse writes msg to a connection over the budget and closes it,
// lingering (see LingerClose) only while few refusals are lingering.
func (b *Budget) Refuse(nc net.Conn, msg []byte) {
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(msg)
	if b.lingering.Add(1) > maxLingering {
		b.lingering.Add(-1)
		_ = nc.Close()
		return
	}
	defer b.lingering.Add(-1)
	LingerClose(nc)
}

// LingerClose half-closes nc and discards what the peer still sends for a
// moment before closing it. Closing a socket with unread input makes the
// kernel reset the connection, and a reset can destroy the error reply we
// just wrote before the peer reads it.
func LingerClose(nc net.Conn) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<20))
	_ = nc.Close()
}
