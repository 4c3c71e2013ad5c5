#!/usr/bin/env python3
"""A sender faster than the proxy, and its client, for tests.

  fastsrv.py serve PORT FILE [--timeout=S]
      on 127.0.0.1:PORT, send FILE to each client with sendfile, then close;
      exits by itself after S seconds (default 120)
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


def serve(a):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", a.port))
    ls.listen(16)
    ls.settimeout(0.2)
    size = os.path.getsize(a.file)
    end = time.monotonic() + a.timeout

    def one(c):
        with c, open(a.file, "rb") as f:
            off = 0
            while off < size:
                off += os.sendfile(c.fileno(), f.fileno(), off, size - off)
            c.shutdown(socket.SHUT_WR)
            c.recv(1)

    while time.monotonic() < end:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=one, args=(c,), daemon=True).start()


def get(a):
    want = hashlib.sha256(open(a.file, "rb").read()).hexdigest()
    h, n, t0 = hashlib.sha256(), 0, time.monotonic()
    with socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout) as s:
        if a.stall:
            if a.ready:
                open(a.ready, "w").write("stalled\n")
            time.sleep(a.stall)
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            h.update(b)
            n += len(b)
    if h.hexdigest() != want or n != os.path.getsize(a.file):
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
