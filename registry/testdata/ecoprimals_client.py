#!/usr/bin/env python3
"""An ecoPrimals-style registry client (stdlib only), for the node's tests.

It sends the Primal IPC Protocol v3.1 seed's messages verbatim over the
registry's Unix socket — ipc.register for beardog with the virtual endpoint
"/primal/beardog", ipc.find_capability for "crypto" — then ipc.resolve by
primal_id as Songbird's ResolveParams has it, and reads the answers the way
ecoPrimals clients do: Songbird's "providers", NestGate's "services", and
the tagged TransportEndpoint {"transport":"uds","path":…} of a resolve.
It prints one line per step and exits 0 when every step worked.

Usage: ecoprimals_client.py REGISTRY_SOCKET EXPECTED_BEARDOG_SOCKET
"""
import json
import socket
import sys

REGISTER = """{
"jsonrpc": "2.0",
"method": "ipc.register",
"params": {
"name": "beardog",
"endpoint": "/primal/beardog",
"capabilities": ["crypto", "btsp", "ed25519", "x25519"],
"version": "2.7.0"
},
"id": 1
}"""

FIND = """{
"jsonrpc": "2.0",
"method": "ipc.find_capability",
"params": { "capability": "crypto" },
"id": 2
}"""

RESOLVE = '{"jsonrpc":"2.0","method":"ipc.resolve","params":{"primal_id":"beardog"},"id":3}'


def call(f, message):
    # One JSON object per line: the seed's pretty-printed text, joined.
    line = json.dumps(json.loads(message), separators=(",", ":"))
    f.write((line + "\n").encode())
    f.flush()
    reply = json.loads(f.readline())
    if "error" in reply:
        raise SystemExit("error: %s" % json.dumps(reply["error"]))
    return reply["result"]


def main():
    sock_path, want = sys.argv[1], sys.argv[2]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sock_path)
    f = s.makefile("rwb")

    reg = call(f, REGISTER)
    if reg.get("virtual_endpoint") != "/primal/beardog":
        raise SystemExit("register: %r" % reg)
    print("registered", reg["virtual_endpoint"])

    found = call(f, FIND)
    for key in ("providers", "services"):
        ids = [p.get("primal_id") for p in found.get(key, [])]
        if ids != ["beardog"]:
            raise SystemExit("find_capability %s: %r" % (key, found))
    print("discovered beardog in providers and services")

    res = call(f, RESOLVE)
    ep = res.get("endpoint")
    if not isinstance(ep, dict) or ep.get("transport") != "uds" or ep.get("path") != want:
        raise SystemExit("resolve endpoint: %r" % res)
    if res.get("native_endpoint") != "unix://" + want:
        raise SystemExit("resolve native_endpoint: %r" % res)
    print("resolved", ep["path"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
