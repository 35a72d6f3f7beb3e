package canonical_test

import (
	"fmt"

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

// Parse reports where and what.
func ExampleParse_error() {
	_, err := canonical.Parse([]byte(`{"id":1,"id":2}`))
	fmt.Println(err)
	// Output: json: at byte 8: duplicate key "id"
}
