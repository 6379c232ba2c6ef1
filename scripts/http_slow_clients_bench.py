#!/usr/bin/env python3
"""Measures the HTTP ports under idle and half-sent clients (issue #16).

Starts the real server on free loopback ports, opens IDLE silent connections and HALF
connections that sent half a request line to each of :http and :admin, then times
/healthz, /readyz, /metrics and /snapshot (ROUNDS requests each, one connection per request,
all while the hostile connections stay open) and prints p50 / p99 / max per endpoint.
Exits 1 when any request fails or is slower than --max-ms. Loopback only; bounded.

  scripts/http_slow_clients_bench.py --server build/server/inferencecache-server
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def request(port, path, timeout=5.0):
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    ms = (time.perf_counter() - t0) * 1000
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--idle", type=int, default=500, help="idle connections per port")
    ap.add_argument("--half", type=int, default=500, help="half-sent requests per port")
    ap.add_argument("--rounds", type=int, default=200, help="requests per endpoint")
    ap.add_argument("--max-ms", type=float, default=100.0)
    args = ap.parse_args()

    need = 2 * (args.idle + args.half) + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))

    data_dir = tempfile.mkdtemp(prefix="ic_http_bench")
    proc = subprocess.Popen(
        [args.server, "--insecure-disable-auth", "--data-dir=" + data_dir,
         "--grpc-bind-address=127.0.0.1:0", "--http-bind-address=127.0.0.1:0",
         "--snapshot-bind-address=127.0.0.1:0", "--http-idle-timeout=60s"],
        stderr=subprocess.PIPE, text=True)
    held = []
    try:
        ports = None
        deadline = time.time() + 30
        while time.time() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            if '"startup"' in line:
                ev = json.loads(line)
                ports = (int(ev["http_addr"].rsplit(":", 1)[1]),
                         int(ev["snapshot_addr"].rsplit(":", 1)[1]))
            if '"ready"' in line:
                break
        if not ports:
            print("server did not start", file=sys.stderr)
            return 1
        http_port, admin_port = ports
        for port in ports:
            for _ in range(args.idle):
                held.append(socket.create_connection(("127.0.0.1", port)))
            for _ in range(args.half):
                s = socket.create_connection(("127.0.0.1", port))
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                held.append(s)
        time.sleep(0.5)  # let the server accept every one of them
        print(f"open hostile connections: {len(held)} ({args.idle} idle + {args.half} half-sent per port)")
        worst = 0.0
        failed = 0
        for port, path in ((http_port, "/healthz"), (http_port, "/readyz"),
                           (http_port, "/metrics"), (admin_port, "/snapshot")):
            times = []
            for _ in range(args.rounds):
                status, ms = request(port, path)
                if status != 200:
                    failed += 1
                times.append(ms)
            times.sort()
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            worst = max(worst, times[-1])
            print(f"{path:10s} n={len(times)} p50={statistics.median(times):.2f}ms "
                  f"p99={p99:.2f}ms max={times[-1]:.2f}ms")
        print(f"failed={failed} worst={worst:.2f}ms (bound {args.max_ms}ms)")
        return 0 if failed == 0 and worst < args.max_ms else 1
    finally:
        for s in held:
            s.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
