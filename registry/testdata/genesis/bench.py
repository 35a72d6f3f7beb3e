"""Time the Genesis-Mesh HTTP registry operations against any Network
Authority — the reference's (Flask under gunicorn) or capmesh's — with one
client, so that both are measured the same way.

usage: bench.py NA_URL OPERATOR_KEY OPERATOR_KEY_ID KEYS REGISTRATIONS QUERIES [ROUNDS]

It enrols KEYS node keys (admin invite + POST /join, as the reference node
does it), then, per round, times REGISTRATIONS sequential POST /agents of
pre-signed descriptors (each newer than the last for its key, spread over
the keys) and QUERIES sequential GET /agents?capability=TAG, each of which returns
all KEYS agents (TAG is unique to the run), and as the floor of one
round trip through this client QUERIES GET /healthz. One keep-alive connection; descriptors are built
and signed before the clock starts. Every request carries its own
X-Forwarded-For so that the reference's per-client rate limits (30
registrations a minute), which sit behind its ProxyFix, do not cut the run
short: the cost measured is the processing, not the limiter. It prints one
JSON line per round; a run prints the median of the rounds last.

This file is capmesh's; it only calls the reference's public functions and
models (genesis_mesh.crypto, genesis_mesh.node), which must be importable.
"""
import base64
import itertools
import json
import statistics
import sys
import time
import uuid
from datetime import datetime, timezone

import requests

from genesis_mesh.crypto import KeyPair, generate_keypair, load_private_key, sign_data
from genesis_mesh.models import GenesisBlock
from genesis_mesh.node.discovery_client import build_signed_descriptor
from genesis_mesh.node.node import MeshNode

na, op_key_path, op_key_id, n_keys, n_reg, n_get, *rest = sys.argv[1:]
n_keys, n_reg, n_get = int(n_keys), int(n_reg), int(n_get)
rounds = int(rest[0]) if rest else 3
op_key = load_private_key(op_key_path)
tag = "bench-" + uuid.uuid4().hex[:8]  # this run's agents alone carry it
s = requests.Session()
ips = (f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}" for i in itertools.count(1))


def hdr(extra=None):
    h = {"X-Forwarded-For": next(ips)}
    h.update(extra or {})
    return h


def admin(path, body):
    ts = datetime.now(timezone.utc).isoformat()
    nonce = str(uuid.uuid4())
    canonical = json.dumps({"body": body, "key_id": op_key_id, "timestamp": ts, "nonce": nonce}, sort_keys=True, separators=(",", ":"))
    h = hdr({"X-Admin-Key-Id": op_key_id, "X-Admin-Timestamp": ts, "X-Admin-Nonce": nonce,
             "X-Admin-Signature": sign_data(canonical.encode(), op_key)})
    r = s.post(na + path, json=body, headers=h, timeout=30)
    r.raise_for_status()
    return r.json()


genesis = GenesisBlock(**s.get(na + "/genesis", timeout=30).json())
keys = []
for i in range(n_keys):
    tok = admin("/admin/invite", {"roles": ["role:client"], "max_validity_hours": 24, "token_expiry_hours": 1})["token_id"]
    kp = generate_keypair()
    node = MeshNode(genesis_block=genesis, node_keypair=kp)
    body = node._sign_request({"node_public_key": kp.public_key_b64, "roles": ["role:client"], "validity_hours": 24, "invite_token": tok})
    r = s.post(na + "/join", json=body, headers=hdr(), timeout=30)
    r.raise_for_status()
    keys.append(kp)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


results = []
for rnd in range(rounds):
    payloads = []
    for i in range(n_reg):
        kp = keys[i % n_keys]
        d = build_signed_descriptor(agent_id=f"agent-{i % n_keys}", node_public_key=kp.public_key_b64,
                                    network_name=genesis.network_name, capabilities=[tag, f"tag-{i % 7}"],
                                    host="127.0.0.1", port=9000 + i % n_keys, scheme="wss", private_key=kp.private_key,
                                    metadata={"round": rnd}, ttl_seconds=600)
        payloads.append(json.dumps(d.model_dump(mode="json")).encode())
        time.sleep(0.000002)  # distinct registered_at per key
    reg = []
    t0 = time.perf_counter()
    for p in payloads:
        a = time.perf_counter()
        r = s.post(na + "/agents", data=p, headers=hdr({"Content-Type": "application/json"}), timeout=30)
        reg.append(time.perf_counter() - a)
        if r.status_code != 200:
            sys.exit(f"POST /agents: {r.status_code} {r.text}")
    reg_total = time.perf_counter() - t0
    get = []
    for _ in range(n_get):
        a = time.perf_counter()
        r = s.get(na + "/agents", params={"capability": tag}, headers=hdr(), timeout=30)
        get.append(time.perf_counter() - a)
        if r.status_code != 200 or r.json()["count"] != n_keys:
            sys.exit(f"GET /agents: {r.status_code} {r.text[:200]}")
    floor = []
    for _ in range(n_get):
        a = time.perf_counter()
        r = s.get(na + "/healthz", headers=hdr(), timeout=30)
        floor.append(time.perf_counter() - a)
    res = {"round": rnd, "register_per_s": n_reg / reg_total, "healthz_p50_ms": pct(floor, 0.5) * 1e3,
           "register_p50_ms": pct(reg, 0.5) * 1e3, "register_p99_ms": pct(reg, 0.99) * 1e3,
           "find_p50_ms": pct(get, 0.5) * 1e3, "find_p99_ms": pct(get, 0.99) * 1e3, "agents": n_keys}
    results.append(res)
    print(json.dumps(res), flush=True)
print(json.dumps({"median": {k: statistics.median(r[k] for r in results) for k in results[0] if k != "round"}}))
