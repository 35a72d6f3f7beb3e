// Command kvhost is a key-value capability host built only with the capmesh
// host library: run it with
//
//	go run ./examples/kvhost
//
// and ask it with `capmesh inspect unix://$XDG_RUNTIME_DIR/biomeos/kv.sock`
// (Level 3, signed announcement) or `capmesh call --socket … kv.put
// '{"key":"a","value":"1"}'`. See examples/README.md.
package main

import (
	"os"

	"github.com/capmesh/capmesh/examples/kvhost/kv"
)

func main() { os.Exit(kv.Main()) }
