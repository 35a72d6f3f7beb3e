//go:build !race

package govalue

const raceEnabled = false
