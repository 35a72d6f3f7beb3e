// node.mjs — the fingerprint benchmark inputs hashed the way the TypeScript
// reference does it under Node (HASHING.md §1–§3: sortValue, JSON.stringify,
// UTF-8, crypto.subtle.digest, hex), for scale next to the Go figures in
// docs/BENCHMARKS.md. The code below is written from HASHING.md, not taken
// from the reference. Run from the repository root:
//
//   node fingerprint/testdata/bench/node.mjs            # timings
//   node fingerprint/testdata/bench/node.mjs --hashes > fingerprint/testdata/bench/hashes.json
//
// The inputs are the ones of fingerprint/bench_test.go: object.json, the
// tool benchTool(1) and the toolkit benchToolkit() (20 tools).
import { readFileSync } from "node:fs";

if (new Intl.Collator().resolvedOptions().locale !== "en-US") throw new Error("run with LANG=en_US.UTF-8 or C.UTF-8");

function sortValue(v) {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map(sortValue);
  const entries = Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => [k, sortValue(x)]);
  entries.sort(([a], [b]) => a.localeCompare(b));
  return Object.fromEntries(entries);
}

const enc = new TextEncoder();
async function hashPlainObject(x) {
  const digest = await crypto.subtle.digest("SHA-256", enc.encode(JSON.stringify(sortValue(x))));
  return Buffer.from(digest).toString("hex");
}

const byCollation = (a, b) => a.localeCompare(b);

function tool(i) {
  const policies = [{ id: "tenant-scope" }, { id: "rate-limit", executeBinding: "hint" }];
  return {
    name: "tool_" + String(i).padStart(2, "0"),
    description: "Searches the memory store and returns the best matching documents.",
    schema: { vendor: "zod", version: 1 },
    instructions: ["Prefer recent documents.", "Cite sources.", "Keep answers short."],
    policies,
  };
}

// HASHING.md §3.1.
function toolHash(t) {
  const ids = t.policies.map((p) => p.id);
  return hashPlainObject({
    kind: "tool",
    name: t.name,
    description: t.description ?? null,
    schema: t.schema,
    instructions: [...t.instructions].sort(byCollation),
    policies: [...ids].sort(byCollation),
    policyBindings: t.policies.length > 0
      ? t.policies.map((p) => ({ id: p.id, executeBinding: p.executeBinding ?? "live" })).sort((a, b) => a.id.localeCompare(b.id))
      : undefined,
  });
}

// HASHING.md §3.2, members hashed once each.
async function toolkitHash(name, instructions, members) {
  const refs = [];
  for (const m of members) refs.push({ name: m.name, hash: await toolHash(m) });
  refs.sort((a, b) => a.name.localeCompare(b.name));
  return hashPlainObject({ kind: "toolkit", name, instructions: instructions ?? null, members: refs });
}

const text = readFileSync(new URL("object.json", import.meta.url), "utf8");
const obj = JSON.parse(text);
const t1 = tool(1);
const kit = Array.from({ length: 20 }, (_, i) => tool(19 - i));

const cases = {
  object: () => hashPlainObject(obj),
  "object-from-text": () => hashPlainObject(JSON.parse(text)),
  tool: () => toolHash(t1),
  toolkit20: () => toolkitHash("root", ["Be helpful."], kit),
};

if (process.argv.includes("--hashes")) {
  const out = { node: process.versions.node, icu: process.versions.icu };
  for (const [name, f] of Object.entries(cases)) out[name] = await f();
  console.log(JSON.stringify(out, null, 1));
} else {
  // Medians of 15 rounds of ~200 ms each, after a warm-up round.
  for (const [name, f] of Object.entries(cases)) {
    const per = [];
    for (let round = 0; round < 16; round++) {
      let n = 0;
      const start = process.hrtime.bigint();
      let now = start;
      while (now - start < 200_000_000n) {
        for (let i = 0; i < 64; i++) await f();
        n += 64;
        now = process.hrtime.bigint();
      }
      if (round > 0) per.push(Number(now - start) / n);
    }
    per.sort((a, b) => a - b);
    const med = per[per.length >> 1];
    console.log(`${name.padEnd(18)} ${(med / 1000).toFixed(2).padStart(8)} µs/hash  ${Math.round(1e9 / med).toString().padStart(8)} hashes/s  (node ${process.versions.node})`);
  }
}
