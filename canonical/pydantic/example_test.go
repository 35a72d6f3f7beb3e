package pydantic_test

import (
	"fmt"
	"time"

	"github.com/capmesh/capmesh/canonical/pydantic"
)

// Genesis-Mesh signs timestamps in pydantic's rendering, not as sent.
func ExampleTime() {
	for _, wire := range []string{"2026-07-01T14:00:00.25+02:00", "2026-07-01T12:30:00.000Z"} {
		t, err := pydantic.ParseTime(wire)
		if err != nil {
			panic(err)
		}
		fmt.Println(pydantic.Time(t))
	}
	fmt.Println(pydantic.Time(time.Date(2026, 6, 30, 10, 11, 12, 345678999, time.UTC)))
	// Output:
	// 2026-07-01T14:00:00.250000+02:00
	// 2026-07-01T12:30:00Z
	// 2026-06-30T10:11:12.345678Z
}
