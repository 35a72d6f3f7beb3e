// extract.mjs — run by `go generate` (see main.go) under the Node.js whose
// collation capmesh reproduces. It writes, into the directory given as
// argv[2]:
//
//   ucadata.icu.gz  ICU's root collation data, copied byte for byte out of the
//                   ICU common data package linked into process.execPath;
//   norm.bin        canonical decompositions and the combining-class order,
//                   derived from String.prototype.normalize("NFD");
//   versions.json   process.versions of the Node that produced them.
//
// Nothing here is copied from ICU's sources: the data is read from the
// running binary and the normalization facts are observed through the
// language API.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

const out = process.argv[2];
if (!out) throw new Error("usage: node extract.mjs OUTDIR");

// --- 1. ICU root collation data -------------------------------------------
// The ICU common data package ("CmnD") starts with an ICU data header
// (uint16 headerSize, magic 0xda 0x27, ...) followed by a table of contents:
// uint32 count, then count × (uint32 nameOffset, uint32 dataOffset), both
// relative to the TOC. Entries are sorted by name.
const bin = readFileSync(process.execPath);
let pkg = -1;
for (let from = 0; ; ) {
  const k = bin.indexOf("CmnD", from);
  if (k < 0) break;
  if (bin[k - 10] === 0xda && bin[k - 9] === 0x27) { pkg = k - 12; break; }
  from = k + 1;
}
if (pkg < 0) throw new Error("no ICU common data package in " + process.execPath);
const toc = pkg + bin.readUInt16LE(pkg);
const count = bin.readUInt32LE(toc);
const entries = [];
for (let i = 0; i < count; i++) {
  const nameOff = toc + bin.readUInt32LE(toc + 4 + 8 * i);
  const dataOff = toc + bin.readUInt32LE(toc + 8 + 8 * i);
  entries.push([bin.toString("latin1", nameOff, bin.indexOf(0, nameOff)), dataOff]);
}
const idx = entries.findIndex(([n]) => /\/coll\/ucadata\.icu$/.test(n));
if (idx < 0 || idx + 1 >= entries.length) throw new Error("coll/ucadata.icu not found");
const uca = bin.subarray(entries[idx][1], entries[idx + 1][1]);
if (uca.toString("latin1", 12, 16) !== "UCol") throw new Error("unexpected ucadata.icu format");
writeFileSync(join(out, "ucadata.icu.gz"), gzipSync(uca, { level: 9 }));

// --- 2. Normalization: decompositions and combining-class order -------------
const isHangulSyllable = (c) => c >= 0xac00 && c <= 0xd7a3;
const isSurrogate = (c) => c >= 0xd800 && c <= 0xdfff;
const decomp = [];
const candidates = [];
for (let c = 0; c <= 0x10ffff; c++) {
  if (isSurrogate(c) || isHangulSyllable(c)) continue;
  const s = String.fromCodePoint(c);
  const d = s.normalize("NFD");
  if (d !== s) decomp.push([c, [...d].map((x) => x.codePointAt(0))]);
  else if (c >= 0x300) candidates.push(c);
}
// A code point c (its own NFD) has a non-zero combining class iff NFD moves
// it relative to U+0334 (ccc 1) or U+0345 (ccc 240).
const nonStarters = candidates.filter((c) => {
  const s = String.fromCodePoint(c);
  return ("a" + s + "\u0334").normalize("NFD") === "a\u0334" + s ||
         ("a\u0345" + s).normalize("NFD") === "a" + s + "\u0345";
});
// Order them: NFD puts the lower class first and keeps equal classes in place.
const cccCmp = (x, y) => {
  const a = String.fromCodePoint(x), b = String.fromCodePoint(y);
  if (("x" + a + b).normalize("NFD") === "x" + b + a) return 1;
  if (("x" + b + a).normalize("NFD") === "x" + a + b) return -1;
  return 0;
};
nonStarters.sort(cccCmp);
const rank = new Map();
let r = 0;
nonStarters.forEach((c, i) => {
  if (i === 0 || cccCmp(nonStarters[i - 1], c) !== 0) r++;
  rank.set(c, r);
});
if (r > 255) throw new Error("too many combining classes");

const parts = [];
const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b; };
const cp3 = (c) => Buffer.from([c >> 16, (c >> 8) & 0xff, c & 0xff]);
parts.push(Buffer.from("NFD1"), u32(decomp.length));
for (const [c, d] of decomp) {
  parts.push(cp3(c), Buffer.from([d.length]), ...d.map(cp3));
}
const ranked = [...rank.entries()].sort((a, b) => a[0] - b[0]);
parts.push(u32(ranked.length));
for (const [c, k] of ranked) parts.push(cp3(c), Buffer.from([k]));
writeFileSync(join(out, "norm.bin"), Buffer.concat(parts));

writeFileSync(join(out, "versions.json"), JSON.stringify({
  node: process.versions.node, icu: process.versions.icu,
  unicode: process.versions.unicode, cldr: process.versions.cldr,
  decompositions: decomp.length, nonStarters: ranked.length, combiningClasses: r,
}, null, 1) + "\n");
