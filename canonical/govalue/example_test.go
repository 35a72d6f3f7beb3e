package govalue_test

import (
	"fmt"

	"github.com/capmesh/capmesh/canonical"
	"github.com/capmesh/capmesh/canonical/govalue"
)

// A CHP payload commitment: sha256(chp-stable-v1(payload)), from a Go value.
func ExampleSHA256Hex() {
	payload := map[string]any{"note": "café"}
	h, err := govalue.SHA256Hex(canonical.ChpStableV1, payload)
	if err != nil {
		panic(err)
	}
	fmt.Println(h)
	// Output: 4fccc2f736d4f0658f6620209643fa71be57f8b0caed76a1e8fbf1d531092943
}

// CHP forbids floats in hashed content; the error names where one is.
func ExampleMarshal_float() {
	_, err := govalue.Marshal(canonical.ChpStableV1, map[string]any{"result": map[string]any{"score": 0.5}})
	fmt.Println(err)
	// Output: canonical chp-stable-v1: at $["result"]["score"]: non-integer number not allowed: 0.5 (write fractional values as strings or scaled integers)
}
