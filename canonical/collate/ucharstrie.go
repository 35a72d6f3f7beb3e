package collate

// ucharsTrie walks one of ICU's serialized UCharsTrie structures, which the
// collation data uses for contraction suffixes and prefix contexts. It
// matches UTF-16 code units one at a time; results follow ICU's
// UStringTrieResult.
type ucharsTrie struct {
	u      []uint16
	pos    int // next unit to read; -1 when stopped
	remain int // remaining units of a linear-match node, minus 1; -1 if none
}

type trieResult uint8

const (
	trieNoMatch trieResult = iota
	trieNoValue
	trieFinalValue
	trieIntermediateValue
)

func (r trieResult) hasValue() bool { return r >= trieFinalValue }
func (r trieResult) hasNext() bool  { return r&1 != 0 }

const (
	ucMaxBranchLinear  = 5
	ucMinLinearMatch   = 0x30
	ucMinValueLead     = 0x40
	ucNodeTypeMask     = ucMinValueLead - 1
	ucValueIsFinal     = 0x8000
	ucMinTwoUnitValue  = 0x4000
	ucThreeUnitValue   = 0x7fff
	ucMinTwoUnitNode   = 0x4040
	ucThreeUnitNode    = 0x7fc0
	ucMinTwoUnitDelta  = 0xfc00
	ucThreeUnitDeltaLd = 0xffff
)

func newUCharsTrie(u []uint16) ucharsTrie { return ucharsTrie{u: u, remain: -1} }

func valueResult(node int) trieResult {
	return trieIntermediateValue - trieResult(node>>15)
}

func (t *ucharsTrie) stop() trieResult { t.pos = -1; return trieNoMatch }

// nextCodePoint matches one code point (two units for a supplementary one).
func (t *ucharsTrie) nextCodePoint(c rune) trieResult {
	if c <= 0xffff {
		return t.next(int(c))
	}
	r := t.next(0xd7c0 + int(c>>10))
	if !r.hasNext() {
		return t.stop()
	}
	return t.next(0xdc00 | int(c&0x3ff))
}

func (t *ucharsTrie) next(unit int) trieResult {
	if t.pos < 0 {
		return trieNoMatch
	}
	pos := t.pos
	if length := t.remain; length >= 0 {
		if pos >= len(t.u) || unit != int(t.u[pos]) {
			return t.stop()
		}
		pos++
		length--
		t.remain, t.pos = length, pos
		if length < 0 && pos < len(t.u) && int(t.u[pos]) >= ucMinValueLead {
			return valueResult(int(t.u[pos]))
		}
		return trieNoValue
	}
	return t.nextImpl(pos, unit)
}

func (t *ucharsTrie) at(pos int) int {
	if pos < 0 || pos >= len(t.u) {
		return 0
	}
	return int(t.u[pos])
}

func (t *ucharsTrie) nextImpl(pos, unit int) trieResult {
	node := t.at(pos)
	pos++
	for {
		switch {
		case node < ucMinLinearMatch:
			return t.branchNext(pos, node, unit)
		case node < ucMinValueLead:
			length := node - ucMinLinearMatch
			if unit != t.at(pos) {
				return t.stop()
			}
			pos++
			length--
			t.remain, t.pos = length, pos
			if length < 0 && t.at(pos) >= ucMinValueLead {
				return valueResult(t.at(pos))
			}
			return trieNoValue
		case node&ucValueIsFinal != 0:
			return t.stop()
		default:
			pos = skipNodeValue(pos, node)
			node &= ucNodeTypeMask
		}
	}
}

func skipNodeValue(pos, lead int) int {
	if lead >= ucMinTwoUnitNode {
		if lead < ucThreeUnitNode {
			return pos + 1
		}
		return pos + 2
	}
	return pos
}

func skipValueLead(pos, lead int) int {
	if lead >= ucMinTwoUnitValue {
		if lead < ucThreeUnitValue {
			return pos + 1
		}
		return pos + 2
	}
	return pos
}

func (t *ucharsTrie) jumpByDelta(pos int) int {
	delta := t.at(pos)
	pos++
	if delta >= ucMinTwoUnitDelta {
		if delta == ucThreeUnitDeltaLd {
			delta = t.at(pos)<<16 | t.at(pos+1)
			pos += 2
		} else {
			delta = (delta-ucMinTwoUnitDelta)<<16 | t.at(pos)
			pos++
		}
	}
	return pos + delta
}

func (t *ucharsTrie) skipDelta(pos int) int {
	delta := t.at(pos)
	pos++
	if delta >= ucMinTwoUnitDelta {
		if delta == ucThreeUnitDeltaLd {
			pos += 2
		} else {
			pos++
		}
	}
	return pos
}

func (t *ucharsTrie) branchNext(pos, length, unit int) trieResult {
	if length == 0 {
		length = t.at(pos)
		pos++
	}
	length++
	for length > ucMaxBranchLinear {
		if unit < t.at(pos) {
			length >>= 1
			pos = t.jumpByDelta(pos + 1)
		} else {
			length -= length >> 1
			pos = t.skipDelta(pos + 1)
		}
	}
	for length > 1 {
		if unit == t.at(pos) {
			pos++
			node := t.at(pos)
			var r trieResult
			if node&ucValueIsFinal != 0 {
				r = trieFinalValue
			} else {
				pos++
				var delta int
				switch {
				case node < ucMinTwoUnitValue:
					delta = node
				case node < ucThreeUnitValue:
					delta = (node-ucMinTwoUnitValue)<<16 | t.at(pos)
					pos++
				default:
					delta = t.at(pos)<<16 | t.at(pos+1)
					pos += 2
				}
				pos += delta
				node = t.at(pos)
				if node >= ucMinValueLead {
					r = valueResult(node)
				} else {
					r = trieNoValue
				}
			}
			t.pos = pos
			return r
		}
		length--
		pos++
		lead := t.at(pos)
		pos = skipValueLead(pos+1, lead&0x7fff)
	}
	if unit == t.at(pos) {
		pos++
		t.pos = pos
		node := t.at(pos)
		if node >= ucMinValueLead {
			return valueResult(node)
		}
		return trieNoValue
	}
	return t.stop()
}

// value returns the value of the last match; call it only after a result
// with hasValue.
func (t *ucharsTrie) value() uint32 {
	pos := t.pos
	lead := t.at(pos)
	pos++
	if lead&ucValueIsFinal != 0 {
		lead &= 0x7fff
		switch {
		case lead < ucMinTwoUnitValue:
			return uint32(lead)
		case lead < ucThreeUnitValue:
			return uint32((lead-ucMinTwoUnitValue)<<16 | t.at(pos))
		default:
			return uint32(t.at(pos)<<16 | t.at(pos+1))
		}
	}
	switch {
	case lead < ucMinTwoUnitNode:
		return uint32(lead>>6 - 1)
	case lead < ucThreeUnitNode:
		return uint32((lead&0x7fc0-ucMinTwoUnitNode)<<10 | t.at(pos))
	default:
		return uint32(t.at(pos)<<16 | t.at(pos+1))
	}
}
