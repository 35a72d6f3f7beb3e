package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capmesh/capmesh/identity"
	"github.com/capmesh/capmesh/wire"
)

// Reading a host that sends rhizoCrypt-style fully qualified group methods:
// the methods are not doubled, and the departure is reported.
func ExampleParse() {
	result := json.RawMessage(`{
		"primal": "rhizocrypt", "version": "0.14.17",
		"methods": ["dag.session.create", "dag.event.append", "health.liveness"],
		"provided_capabilities": [{"type": "dag", "methods": ["dag.session.create", "dag.event.append"]}],
		"protocol": "jsonrpc_2.0"
	}`)
	c, err := wire.Parse(result)
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Source, c.Methods)
	fmt.Println(c.Groups[0].Type, c.Groups[0].Methods)
	for _, d := range c.Deviations {
		fmt.Println("deviation:", d.Field)
	}
	// Output:
	// methods [dag.session.create dag.event.append health.liveness]
	// dag [dag.session.create dag.event.append]
	// deviation: provided_capabilities
	// deviation: protocol
}

// Signing an announcement as a host and verifying it as a reader.
func ExampleSignAnnouncement() {
	key, err := identity.Generate()
	if err != nil {
		panic(err)
	}
	methods := []string{"braid.create", "health.liveness"}
	sa := wire.SignAnnouncement(key, "sweetgrass", "0.8.0", methods)

	v, err := wire.VerifyAnnouncement(sa, "sweetgrass", "0.8.0", methods)
	fmt.Println(err, v.Encoding, v.PublicKey == key.Public())
	_, err = wire.VerifyAnnouncement(sa, "sweetgrass", "0.8.0", append(methods, "evil.method"))
	fmt.Println(errors.Is(err, wire.ErrAnnouncementSignature))
	// Output:
	// <nil> hex true
	// true
}

// The compliance level of a captured response, without a live probe: the
// requirements only a live host can settle are unknown, not failed.
func ExampleLevel() {
	c, _ := wire.Parse(json.RawMessage(`{"primal":"demo","version":"1.0.0","methods":["demo.echo","identity"]}`))
	r := wire.Level(c, nil)
	fmt.Println("level", r.Level, "verified", r.Verified)
	for _, reason := range r.Reasons() {
		fmt.Println(reason)
	}
	// Output:
	// level 1 verified 0
	// L2 method names follow the domain.operation convention: 1 names do not: ["identity" (no dot: a method needs a domain and an operation)]
	// L3 provided_capabilities grouping present with type + methods per group: "provided_capabilities" is absent
	// L3 consumed_capabilities lists the cross-primal dependencies (method names): "consumed_capabilities" is absent
	// L3 cost_estimates present for high-cost methods: "cost_estimates" is absent
	// L3 operation_dependencies present for methods with prerequisites: "operation_dependencies" is absent
}

// A method name is checked when it is registered, not when it is called.
func ExampleValidateMethodName() {
	fmt.Println(wire.ValidateMethodName("dag.session.create"))
	fmt.Println(wire.ValidateMethodName("Braid.create"))
	// Output:
	// <nil>
	// method name "Braid.create": segment "Braid" must start with a lowercase letter (want domain.operation matching ^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$)
}
