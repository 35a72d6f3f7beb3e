// Package deptest holds the whole-tree dependency test (as tailscale's
// tstest/deptest): it reads the module's import graph with `go list -deps
// -json` and fails when
//
//   - a package has no layer in the table (layers_test.go): every package
//     must say where it sits in DESIGN.md's layout;
//   - a package imports one of a higher layer: arrows point down only
//     (cmd → node → services → mechanisms → foundations);
//   - a foundation every consumer links — the pure protocol packages chp and
//     chp/witnessing, identity, wire, jsonrpc (and jhttp), canonical — pulls in a heavy
//     dependency (CEL, protobuf, ANTLR, a SQLite, etcd, PostgreSQL, the
//     OpenTelemetry SDK, Prometheus), or chp or chp/witnessing anything
//     beyond the standard library, canonical, identity and crypto: a bundle
//     verifier must stay small;
//   - the host library pulls in etcd, PostgreSQL, the dashboard or the
//     telemetry SDKs.
//
// It also holds the whole-tree function-length test (funclen_test.go): no
// function of the module, tests aside, is over 100 lines unless longFuncs
// lists it with its reason, and that list only shrinks; and the package-size
// test (pkgsize_test.go): no package has over 2,500 non-test lines unless
// largePackages lists it with a ceiling that only comes down.
//
// It has no code of its own; run it with `go test ./internal/deptest`.
package deptest
