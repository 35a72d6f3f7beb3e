package logstore

import "github.com/capmesh/capmesh/evidence/logstore/internal/format"

// The names the tests of package logstore give what package format (the
// byte format of the log, moved out of logstore for its size) provides.
const (
	headerSize  = format.HeaderSize
	maxSequence = format.MaxSequence
	blockKind   = format.BlockKind
	blockHeader = format.BlockHeader
	maxBlockRaw = format.MaxBlockRaw
	blockTarget = format.BlockTarget
	blockMin    = format.BlockMin
	dictNone    = format.DictNone
	dictV1      = format.DictV1
	codecS2     = format.CodecS2
)

var (
	dictionaryV1 = format.DictionaryV1()
	dictV3       = format.DictV3
	seal         = format.Seal
	appendGap    = format.AppendGap
	appendBlock  = format.AppendBlock
	isBlock      = format.IsBlock
	isPacked     = format.IsPacked
	decodeBlock  = format.DecodeBlock
	decodePacked = format.DecodePacked
	compress     = format.Compress
	records      = format.Records
)
