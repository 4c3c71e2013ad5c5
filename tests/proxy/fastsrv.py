#!/usr/bin/env python3
"""A sender faster than the proxy, and its client, for tests.

  fastsrv.py serve PORT FILE [--timeout=S]
      on 127.0.0.1:PORT, send FILE to each client in turn with sendfile, then
      close (bench/proxy_bench.py's server); exits by itself after S seconds
      (default 120)
  fastsrv.py get PORT FILE [--stall=S] [--ready=PATH] [--timeout=S]
      download from 127.0.0.1:PORT (reading nothing for the first S seconds;
      PATH is written when the stall begins) and check the bytes are FILE's:
      prints "ok N bytes in T s" and exits 0, or says what differs and exits 1
"""
import argparse
import hashlib
import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "bench")]
from proxy_bench import serve as serve_file  # noqa: E402  (the benchmark's sendfile server)
from pxtool import hash_to_eof  # noqa: E402


def serve(a):
    stop = threading.Event()
    threading.Timer(a.timeout, stop.set).start()
    serve_file(a.file, a.port, stop)
    return 0


def get(a):
    want = hashlib.sha256(open(a.file, "rb").read()).hexdigest()
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout) as s:
        if a.stall:
            if a.ready:
                open(a.ready, "w").write("stalled\n")
            time.sleep(a.stall)
        got, n = hash_to_eof(s.recv, 1 << 20)
    if got != want or n != os.path.getsize(a.file):
        print(f"got {n} bytes, not the {os.path.getsize(a.file)} of {a.file}")
        return 1
    print(f"ok {n} bytes in {time.monotonic() - t0:.2f} s")
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=("serve", "get"))
    p.add_argument("port", type=int)
    p.add_argument("file")
    p.add_argument("--stall", type=float, default=0)
    p.add_argument("--ready")
    p.add_argument("--timeout", type=float, default=120)
    a = p.parse_args()
    return serve(a) if a.cmd == "serve" else get(a)


if __name__ == "__main__":
    sys.exit(main())
