// Package auditcmd holds `capmesh audit` (package conformance over the
// real wire: one host, or every socket of the machine, as a table, JSON or
// JUnit, with --require gates; `audit fake-host` serves deliberately broken
// hosts) and `capmesh compose` (package compose: a composition of hosts
// from files, live hosts or the registry, analysed and planned).
package auditcmd
