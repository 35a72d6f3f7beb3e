// Generate canonical/testdata/es/cases.json: for every input of
// ../python/cases.json, its RFC 8785 (JCS) form as computed by Node's own
// JSON.parse, Number.prototype.toString and UTF-16 key sort — an independent
// implementation of the rules the jcs profile follows. null means RFC 8785
// has no output (a lone surrogate, or a number that overflows a double).
// Also writes random doubles with their ECMAScript rendering.
// Run from this directory after python_cases.py: node es_cases.mjs
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';

const lone = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function jcs(v) {
  if (v === null || typeof v === 'boolean') return JSON.stringify(v);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error('non-finite');
    return String(v);
  }
  if (typeof v === 'string') {
    if (lone.test(v)) throw new Error('lone surrogate');
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']';
  const keys = Object.keys(v).sort(); // UTF-16 code unit order
  return '{' + keys.map((k) => jcs(k) + ':' + jcs(v[k])).join(',') + '}';
}

const py = JSON.parse(readFileSync('../python/cases.json', 'utf8'));
const cases = [];
for (const c of py.cases) {
  let out = null;
  try {
    // JSON.parse maps a literal beyond the double range to Infinity, which
    // jcs() refuses; __proto__ keys are not generated.
    out = jcs(JSON.parse(c.input));
  } catch (e) {
    out = null;
  }
  cases.push({ name: c.name, input: c.input, jcs: out });
}

// Random doubles by bit pattern, written as 17-digit literals.
let seed = 0x2026n;
function next64() {
  // xorshift64*
  seed ^= seed >> 12n; seed ^= (seed << 25n) & 0xffffffffffffffffn; seed ^= seed >> 27n;
  return (seed * 0x2545f4914f6cdd1dn) & 0xffffffffffffffffn;
}
const buf = new DataView(new ArrayBuffer(8));
const doubles = [];
while (doubles.length < 2000) {
  buf.setBigUint64(0, next64());
  const x = buf.getFloat64(0);
  if (!Number.isFinite(x)) continue;
  doubles.push({ literal: x.toExponential(16), es: String(x) });
}
for (const lit of ['1e21', '1e-7', '1e-6', '123e-20', '0.000001', '1e20', '999999999999999900000',
  '9.999999999999997e-7', '333333333.33333325', '5e-324', '1.7976931348623157e308', '-0', '-0.0',
  '295147905179352830000', '9007199254740993', '12345678901234567890']) {
  doubles.push({ literal: lit, es: String(Number(lit)) });
}

mkdirSync('../es', { recursive: true });
writeFileSync('../es/cases.json', JSON.stringify({ generator: 'canonical/testdata/gen/es_cases.mjs', node: process.version, cases, doubles }, null, 1) + '\n');
console.log(cases.length, 'cases,', doubles.length, 'doubles');
