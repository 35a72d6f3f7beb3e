// Package tools pins the versions of the development tools capmesh's CI
// runs, with tool directives in this directory's go.mod, a module of its
// own so that no tool's dependencies enter the root module's graph:
//
//	go -C internal/tools tool staticcheck  (prints usage)
//	"$(go -C internal/tools tool -n staticcheck)" ./...  (from the root)
//
// It has no code.
package tools
