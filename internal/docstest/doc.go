// Package docstest checks the project's documents against the code: every
// decision in docs/DECISIONS.md names a test that pins it, and every test it
// names exists. It has no code of its own.
package docstest
