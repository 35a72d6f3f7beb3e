#!/usr/bin/env python3
"""A stand-in for a Songbird registry, for announce's tests (stdlib only).

It behaves as the issue describes Songbird: ipc.register is trust on first
use (the first registrant of a name owns it; a registration of a live name
from another endpoint is refused as a duplicate, one from the same endpoint
renews it), there is no ipc.heartbeat (-32603 "Unknown method", as Songbird
answers), and registrations expire after --ttl seconds of the mock's clock,
which runs --speed times faster than the wall clock.

mock.stats reports what the test checks: how long (mock time) the name was
not registered after its first registration, and the calls seen.

Usage: songbird_mock.py --socket PATH [--speed K] [--ttl SECONDS]
"""
import argparse
import json
import os
import socketserver
import sys
import threading
import time


class Registry:
    def __init__(self, speed, ttl):
        self.speed = speed
        self.ttl = ttl
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.entries = {}  # name -> {"endpoint", "capabilities", "expires"}
        self.gaps = {}  # name -> mock seconds unregistered since first registration
        self.counts = {"register": 0, "renew": 0, "duplicate": 0, "heartbeat": 0}

    def now(self):
        return (time.monotonic() - self.t0) * self.speed

    def register(self, p):
        name = (p.get("primal_id") or p.get("name") or "").lower()
        endpoint = p.get("endpoint") or p.get("socket_path") or p.get("socket")
        if not name or not endpoint:
            raise RpcError(-32602, "name and endpoint are required")
        with self.lock:
            now = self.now()
            e = self.entries.get(name)
            if e is not None and e["expires"] >= now and e["endpoint"] != endpoint:
                self.counts["duplicate"] += 1
                raise RpcError(-32000, "duplicate registration: %s is already registered" % name)
            if e is not None:
                if e["expires"] < now:
                    self.gaps[name] = self.gaps.get(name, 0.0) + (now - e["expires"])
                self.counts["renew"] += 1
            else:
                self.gaps.setdefault(name, 0.0)
                self.counts["register"] += 1
            self.entries[name] = {"endpoint": endpoint, "capabilities": p.get("capabilities") or [],
                                  "expires": now + self.ttl}
        return {"registered": True, "primal_id": name, "ttl_seconds": self.ttl}

    def find(self, p):
        cap = p.get("capability", "")
        with self.lock:
            now = self.now()
            out = [{"primal_id": n, "endpoint": e["endpoint"], "capabilities": e["capabilities"]}
                   for n, e in sorted(self.entries.items())
                   if e["expires"] >= now and cap in e["capabilities"]]
        return {"capability": cap, "services": out}

    def stats(self, p):
        name = p.get("name", "")
        with self.lock:
            now = self.now()
            gap = self.gaps.get(name, 0.0)
            e = self.entries.get(name)
            live = e is not None and e["expires"] >= now
            if e is not None and not live:
                gap += now - e["expires"]
            return {"elapsed": now, "gap_seconds": gap, "live": live, "counts": dict(self.counts)}


class RpcError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def make_handler(reg):
    methods = {
        "ipc.register": reg.register,
        "ipc.find_capability": reg.find,
        "mock.stats": reg.stats,
    }

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                line = line.strip()
                if not line:
                    continue
                try:
                    req = json.loads(line)
                except ValueError:
                    self.reply({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
                    continue
                method = req.get("method")
                if method == "ipc.heartbeat":
                    with reg.lock:
                        reg.counts["heartbeat"] += 1
                fn = methods.get(method)
                try:
                    if fn is None:
                        raise RpcError(-32603, "Unknown method: %s" % method)
                    res = {"jsonrpc": "2.0", "id": req.get("id"), "result": fn(req.get("params") or {})}
                except RpcError as e:
                    res = {"jsonrpc": "2.0", "id": req.get("id"), "error": {"code": e.code, "message": e.message}}
                if "id" in req:
                    self.reply(res)

        def reply(self, obj):
            self.wfile.write((json.dumps(obj) + "\n").encode())
            self.wfile.flush()

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--ttl", type=float, default=60.0)
    args = ap.parse_args()
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    reg = Registry(args.speed, args.ttl)
    socketserver.ThreadingUnixStreamServer.daemon_threads = True
    with socketserver.ThreadingUnixStreamServer(args.socket, make_handler(reg)) as srv:
        print("ready", flush=True)
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
