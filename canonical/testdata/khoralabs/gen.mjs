// gen.mjs — differential cases for the khoralabs profile, answered by
// Node.js v20.20.2 itself. Run from the repository root:
//
//   node canonical/testdata/khoralabs/gen.mjs > canonical/testdata/khoralabs/cases.json
//
// Each case is a JSON text built here (so member order, number literals and
// escapes are exactly as chosen), and the canonical string and SHA-256 that
// hashPlainObject's algorithm (HASHING.md §2: sortValue, then
// JSON.stringify) gives for JSON.parse(text) under this Node. The sortValue
// below is written from that description.
import { createHash } from "node:crypto";

if (process.versions.icu !== "78.2") throw new Error("want Node 20.20.2 (ICU 78.2), have " + process.versions.icu);
if (new Intl.Collator().resolvedOptions().locale !== "en-US") throw new Error("run with LANG=en_US.UTF-8 or C.UTF-8");

function sortValue(v) {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map(sortValue);
  const entries = Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => [k, sortValue(x)]);
  entries.sort(([a], [b]) => a.localeCompare(b));
  return Object.fromEntries(entries);
}

// Deterministic PRNG (mulberry32).
let seed = 0x6b686f72;
const rnd = () => {
  seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (a) => a[Math.floor(rnd() * a.length)];

const keyPool = [
  "a", "b", "z", "A", "B", "Z", "_", "_a", "-", "-a", "a_b", "a-b", "ab", "aB", "Ab", "AB", "ac",
  "name", "Name", "kind", "description", "inputSchema", "policyBindings", "$schema", "~standard", "__proto__",
  "0", "1", "2", "10", "9", "01", "-1", "1.5", "1e3", " 1", "4294967294", "4294967295", "99999999999",
  "é", "e\u0301", "f", "ß", "st", "ss", "Å", "\u212b", "\u00c5", "😀", "🔒", "a\u0001", "a\u200d", "\u200d",
  "", " ", "\t", "a10", "a2", "ä", "ö", "z\u0308", "ﬀ", "ff", "\ufffd", "\ud800", "\udc00x", "中", "𠀀", "가",
  "ǅ", "ǆ", "Ǆ", "ı", "İ", "i\u0307", "ς", "σ", "Σ", "ア", "あ", "ｱ", "\u0660", "0\u0660", "٠", "x\u2028",
];
const numPool = [
  "0", "-0", "1", "-1", "1.0", "1e0", "1E+2", "0.1", "0.30000000000000004", "1e21", "1e20", "1e-7", "0.000001",
  "1.5e-7", "5e-324", "1.7976931348623157e308", "9007199254740993", "9007199254740994", "12345678901234567890",
  "123456789012345680000", "1e400", "-1e400", "1e-400", "100", "3.14159", "-2.5e-10", "4294967295", "0.1e1",
];
const strPool = [
  "", "x", "hello", "café", "e\\u0301", "\\u2028\\u2029", "\\u0000\\u001f\\u007f", "<>&'/", "\\\"\\\\",
  "\\b\\f\\n\\r\\t", "😀", "\\ud83d\\ude00", "\\ud800", "\\udfff", "x\\ud800y", "\\ufeff", "\\u0085", "日本語",
];

function genValue(depth) {
  const r = rnd();
  if (depth > 2 || r < 0.5) {
    const s = rnd();
    if (s < 0.3) return pick(numPool);
    if (s < 0.75) return '"' + pick(strPool) + '"';
    return pick(["true", "false", "null"]);
  }
  if (r < 0.6) {
    const n = Math.floor(rnd() * 4);
    return "[" + Array.from({ length: n }, () => genValue(depth + 1)).join(",") + "]";
  }
  return genObject(depth);
}

const esc = (k) => JSON.stringify(k).replace(/[\ud800-\udfff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16));
function genObject(depth) {
  const n = Math.floor(rnd() * 7);
  const keys = new Set();
  while (keys.size < n) keys.add(pick(keyPool));
  const ks = [...keys];
  // shuffle
  for (let i = ks.length - 1; i > 0; i--) { const j = Math.floor(rnd() * (i + 1)); [ks[i], ks[j]] = [ks[j], ks[i]]; }
  return "{" + ks.map((k) => esc(k) + ":" + genValue(depth + 1)).join(",") + "}";
}

const cases = [];
const fixed = [
  '{"b":1,"10":2,"2":3,"a":4}',
  '{"e\\u0301":1,"\\u00e9":2}',
  '{"\\u00e9":2,"e\\u0301":1}',
  '{"z":1,"a":{"c":1,"b":2}}',
  '[1e21,1e20,1e-7,0.000001,1.5e-7,5e-324,1.7976931348623157e308,9007199254740994,123456789012345680000,-0,1e400]',
  '"\\u2028\\u2029\\u00e9\\ud800\\u0007\\u007f"',
  '{"__proto__":1,"constructor":2,"toString":3}',
];
for (const t of fixed) cases.push(t);
for (let i = 0; i < 250; i++) cases.push(genObject(0));

const out = cases.map((text) => {
  const canonical = JSON.stringify(sortValue(JSON.parse(text)));
  const hash = createHash("sha256").update(new TextEncoder().encode(canonical)).digest("hex");
  return { in: text, canonical, hash };
});
process.stdout.write(JSON.stringify({
  generator: "canonical/testdata/khoralabs/gen.mjs",
  node: process.versions.node, icu: process.versions.icu,
  cases: out,
}, null, 1) + "\n");
