// Command ratios summarises `go test -bench RoundTrip` output from
// internal/bench as the table in docs/BENCHMARKS.md: the median round trips
// per second of each server in each transport and pattern, as a ratio of
// the raw echo (the physical limit) and of the faster peer library.
//
//	cd internal/bench && go test . -run '^$' -bench RoundTrip -count 5 | go run ./ratios
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
)

var line = regexp.MustCompile(`^BenchmarkRoundTrip/(\w+)/(\w+)/([\w-]+)-\d+\s+\d+\s+[\d.]+ ns/op\s+([\d.]+) rt/s(?:\s+(\d+) B/op\s+(\d+) allocs/op)?`)

type key struct{ net, pattern, server string }

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func main() {
	rates := map[key][]float64{}
	allocs := map[key]string{}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		k := key{m[1], m[2], m[3]}
		r, _ := strconv.ParseFloat(m[4], 64)
		rates[k] = append(rates[k], r)
		if m[6] != "" {
			allocs[k] = m[6]
		}
	}
	servers := []string{"echo", "capmesh", "capmesh-go", "jrpc2", "sourcegraph"}
	fmt.Println("| transport | pattern | server | round trips/s (median) | × raw echo | × faster library | allocs/op |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, n := range []string{"unix", "tcp"} {
		for _, p := range []string{"seq", "pipe", "conns64"} {
			echo := median(rates[key{n, p, "echo"}])
			lib := max(median(rates[key{n, p, "jrpc2"}]), median(rates[key{n, p, "sourcegraph"}]))
			for _, s := range servers {
				k := key{n, p, s}
				r := median(rates[k])
				if r == 0 {
					continue
				}
				vsLib := "—"
				if s == "capmesh" || s == "capmesh-go" {
					vsLib = fmt.Sprintf("%.1f×", r/lib)
				}
				fmt.Printf("| %s | %s | %s | %.0fk | %.2f× | %s | %s |\n", n, p, s, r/1000, r/echo, vsLib, allocs[k])
			}
		}
	}
}
