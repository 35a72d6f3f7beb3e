// Package pydantic renders and reads timestamps the way pydantic v2 writes
// an aware datetime in JSON mode, the rendering Genesis-Mesh signs. The
// genesis profile of package canonical signs strings as they are, so a
// timestamp must be brought to this rendering before it is signed: Time
// writes it, ParseTime reads any RFC 3339 date-time with an explicit offset
// into a time.Time that Time writes back in pydantic's form.
//
//	wire "2026-07-01T14:00:00.25+02:00" ──ParseTime──▶ time.Time ──Time──▶ "2026-07-01T14:00:00.250000+02:00"
package pydantic
