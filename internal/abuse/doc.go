// Package abuse holds the abuse corpus of capmesh's transports: a test
// that builds the real capmesh binary, starts `capmesh server` on a
// private runtime directory under a low file descriptor limit, and throws
// hostile and unlucky input at its Unix socket, TCP port and HTTP listener
// — random bytes, mutated requests, deep nesting, huge batches, oversize
// frames, invalid UTF-8, slowloris lines and bodies, idle floods beyond
// the connection budget, peers that never read, half-closes. While the
// attack is held it checks that the node's owner is still answered on the
// Unix socket, that no reply is held back, and that the node's peak RSS
// stays below a stated bound; at the end, that the node exits cleanly.
//
// The package has no code of its own; `go test -short` skips the corpus.
package abuse
