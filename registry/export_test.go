package registry

import "encoding/json"

// NextHop exposes the router's hop-count step to the external tests.
func NextHop(n *Node, params json.RawMessage) (json.RawMessage, error) { return n.nextHop(params) }
