// oracle.mjs — answers collation questions with Node's own Intl.Collator, for
// the fidelity corpus of package collate (see oracle_test.go). It reads one
// JSON request from stdin and writes one JSON answer to stdout.
//
// Strings travel as UTF-16 code units in hex (4 digits per unit), so lone
// surrogates survive the trip.
//
// The collator is pinned to what the reference runs under: String.prototype
// .localeCompare(other) with no arguments uses the process default locale.
// We construct it explicitly for "en-US" with default options and check that
// it agrees with the no-argument localeCompare of this process.
import { createHash } from "node:crypto";

const coll = new Intl.Collator("en-US");
const ro = coll.resolvedOptions();
if (ro.locale !== "en-US" || ro.sensitivity !== "variant" || ro.numeric || ro.caseFirst !== "false" || ro.ignorePunctuation) {
  throw new Error("unexpected collator options " + JSON.stringify(ro));
}
const dec = (h) => {
  let s = "";
  for (let i = 0; i < h.length; i += 4) s += String.fromCharCode(parseInt(h.slice(i, i + 4), 16));
  return s;
};
const sign = (x) => (x < 0 ? -1 : x > 0 ? 1 : 0);

let input = "";
process.stdin.setEncoding("utf8");
for await (const chunk of process.stdin) input += chunk;
const req = JSON.parse(input);
const res = { versions: process.versions, locale: ro.locale };

if (req.pairs) {
  res.pairs = req.pairs.map(([a, b]) => {
    const x = dec(a), y = dec(b);
    const s = sign(coll.compare(x, y));
    if (process.env.LANG === undefined || /^(C|en_US|POSIX)/.test(process.env.LANG)) {
      if (sign(x.localeCompare(y)) !== s) throw new Error("localeCompare disagrees with en-US collator");
    }
    return s;
  });
}

if (req.allCodePoints) {
  // Stable-sort every code point (surrogates as lone units) and hash the
  // result in chunks: "hex,tie\n" per entry, tie=1 when the entry compares
  // equal to the one before it.
  const all = [];
  for (let c = 0; c <= 0x10ffff; c++) all.push(c);
  const str = all.map((c) => (c >= 0xd800 && c <= 0xdfff ? String.fromCharCode(c) : String.fromCodePoint(c)));
  const idx = all.map((_, i) => i);
  idx.sort((i, j) => coll.compare(str[i], str[j]));
  const size = req.chunkSize;
  res.chunks = [];
  for (let k = 0; k < idx.length; k += size) {
    const h = createHash("sha256");
    for (let n = k; n < Math.min(k + size, idx.length); n++) {
      const tie = n > 0 && coll.compare(str[idx[n - 1]], str[idx[n]]) === 0 ? 1 : 0;
      h.update(all[idx[n]].toString(16) + "," + tie + "\n");
    }
    res.chunks.push(h.digest("hex"));
  }
}
process.stdout.write(JSON.stringify(res));
