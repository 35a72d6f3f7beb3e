package registry_test

import (
	"testing"

	"github.com/capmesh/capmesh/registry"
	"github.com/capmesh/capmesh/registry/storetest"
)

func TestMemStore(t *testing.T) {
	storetest.Run(t, func(*testing.T, string) registry.Store { return registry.NewMemStore() }, false)
}
