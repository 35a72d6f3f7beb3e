package canonical_test

import (
	"fmt"
	"time"

	"github.com/capmesh/capmesh/canonical"
)

// The same document under each profile.
func Example() {
	doc := []byte(`{"note":"café 🔒","n":[1,-0],"a":{"z":true,"y":null}}`)
	for _, name := range []string{"chp-stable-v1", "genesis", "jcs"} {
		p, err := canonical.ProfileByName(name)
		if err != nil {
			panic(err)
		}
		out, err := canonical.Canonicalize(p, doc)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-13s %s\n", name, out)
	}
	// Output:
	// chp-stable-v1 {"a": {"y": null, "z": true}, "n": [1, 0], "note": "caf\u00e9 \ud83d\udd12"}
	// genesis       {"a":{"y":null,"z":true},"n":[1,0],"note":"caf\u00e9 \ud83d\udd12"}
	// jcs           {"a":{"y":null,"z":true},"n":[1,0],"note":"café 🔒"}
}

// A CHP payload commitment: sha256(chp-stable-v1(payload)), from a Go value.
func ExampleSHA256Hex() {
	payload := map[string]any{"note": "café"}
	h, err := canonical.SHA256Hex(canonical.ChpStableV1, payload)
	if err != nil {
		panic(err)
	}
	fmt.Println(h)
	// Output: 4fccc2f736d4f0658f6620209643fa71be57f8b0caed76a1e8fbf1d531092943
}

// CHP forbids floats in hashed content; the error names where one is.
func ExampleMarshal_float() {
	_, err := canonical.Marshal(canonical.ChpStableV1, map[string]any{"result": map[string]any{"score": 0.5}})
	fmt.Println(err)
	// Output: canonical chp-stable-v1: at $["result"]["score"]: non-integer number not allowed: 0.5 (write fractional values as strings or scaled integers)
}

// Genesis-Mesh signs timestamps in pydantic's rendering, not as sent.
func ExamplePydanticTime() {
	for _, wire := range []string{"2026-07-01T14:00:00.25+02:00", "2026-07-01T12:30:00.000Z"} {
		t, err := canonical.ParsePydanticTime(wire)
		if err != nil {
			panic(err)
		}
		fmt.Println(canonical.PydanticTime(t))
	}
	fmt.Println(canonical.PydanticTime(time.Date(2026, 6, 30, 10, 11, 12, 345678999, time.UTC)))
	// Output:
	// 2026-07-01T14:00:00.250000+02:00
	// 2026-07-01T12:30:00Z
	// 2026-06-30T10:11:12.345678Z
}

// Parse reports where and what.
func ExampleParse_error() {
	_, err := canonical.Parse([]byte(`{"id":1,"id":2}`))
	fmt.Println(err)
	// Output: json: at byte 8: duplicate key "id"
}
