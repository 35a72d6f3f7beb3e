//go:build race

package merkle

// raceEnabled scales the randomized tests down under -race, which makes
// their hashing several times slower, so that the package stays within
// the project's 20-second bound on a loaded 2-core machine.
const raceEnabled = true
