#!/usr/bin/env python3
"""Proxy benchmark, loopback part: a file downloaded by a client straight from a
server (plain TCP), through a relay that only copies bytes (bench/byterelay.c:
what the extra hop costs, apart from what wanopt does to the bytes) and through
an edge/core pair whose stores already hold the file (repeated data), in the
same run, taking turns; medians of TRIALS downloads each, and the ratios.  The
link part (the reference transfer over an emulated T1) is in netem/bench.
Results: results/proxy-loopback.{md,json}.
"""
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WANOPT = os.path.join(ROOT, os.environ.get("BINDIR", "bin"), "wanopt")
TRIALS = int(os.environ.get("TRIALS", "5"))
SIZE = int(os.environ.get("SIZE_MB", "200")) << 20
BYTERELAY = os.environ.get("BYTERELAY", os.path.join(ROOT, "build", "bench", "byterelay"))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(path, port, stop):
    """Send the whole file to each client with sendfile, then close."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)
    ls.settimeout(0.2)
    size = os.path.getsize(path)
    while not stop.is_set():
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        with c, open(path, "rb") as f:
            off = 0
            while off < size:
                off += os.sendfile(c.fileno(), f.fileno(), off, size - off)
            c.shutdown(socket.SHUT_WR)
            c.recv(1)
    ls.close()


def download(port, expect):
    """Read everything from port; return seconds.  Fails on a short read."""
    buf = bytearray(4 << 20)
    mv = memoryview(buf)
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        got = 0
        while True:
            n = s.recv_into(mv)
            if not n:
                break
            got += n
    dt = time.perf_counter() - t0
    if got != expect:
        raise SystemExit(f"bench: got {got} bytes, expected {expect}")
    return dt


def make_file(path):
    """SIZE bytes of source-tar-like data: /usr/include repeated as needed."""
    if os.path.exists(path) and os.path.getsize(path) == SIZE:
        return
    log(f"  building a {SIZE >> 20} MiB file from /usr/include")
    tar = subprocess.run(["tar", "-cf", "-", "-C", "/", "usr/include"], capture_output=True).stdout
    with open(path, "wb") as f:
        left = SIZE
        while left:
            n = min(left, len(tar))
            f.write(tar[:n])
            left -= n


def main():
    # SIGTERM (a timeout) ends the run through the finally below, which stops the daemons and the relay
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench: terminated"))
    work = os.environ.get("BENCH_DIR", "/tmp/wanopt-bench")
    os.makedirs(work, exist_ok=True)
    path = f"{work}/loopback-{SIZE >> 20}M.bin"
    make_file(path)
    procs, stop = [], threading.Event()
    with tempfile.TemporaryDirectory(prefix="wanopt-pbench-") as tmp:
        try:
            sport, tport, fport, hcore, hedge, rport = (free_port() for _ in range(6))
            threading.Thread(target=serve, args=(path, sport, stop), daemon=True).start()
            if os.access(BYTERELAY, os.X_OK):
                procs.append(subprocess.Popen([BYTERELAY, str(rport), str(sport)]))
            else:
                log(f"  no {BYTERELAY} (make build/bench/byterelay): the byte relay is left out")
                rport = None
            subprocess.run([WANOPT, "pki", "init", f"{tmp}/pki"], check=True, capture_output=True)
            common = [f"--tls_ca={tmp}/pki/ca.crt", "--log_level=warn"]
            procs.append(subprocess.Popen([WANOPT, "core", f"--listen=127.0.0.1:{tport}", "--allow=127.0.0.0/8",
                                           f"--store={tmp}/core-store", "--store_size=2G",
                                           f"--tls_cert={tmp}/pki/core.crt", f"--tls_key={tmp}/pki/core.key",
                                           f"--stats=127.0.0.1:{hcore}"] + common))
            procs.append(subprocess.Popen([WANOPT, "edge", f"--peer=127.0.0.1:{tport}",
                                           f"--forward=127.0.0.1:{fport} -> 127.0.0.1:{sport}",
                                           f"--store={tmp}/edge-store", "--store_size=2G",
                                           f"--tls_cert={tmp}/pki/edge.crt", f"--tls_key={tmp}/pki/edge.key",
                                           f"--stats=127.0.0.1:{hedge}"] + common))
            time.sleep(1.0)
            log("  first transfer through the pair (cold: fills both stores)")
            cold = download(fport, SIZE)
            plain, relay, pair = [], [], []
            for i in range(TRIALS):
                log(f"  trial {i + 1}/{TRIALS}: plain TCP, the byte relay, then the pair (hot)")
                plain.append(download(sport, SIZE))
                if rport:
                    relay.append(download(rport, SIZE))
                pair.append(download(fport, SIZE))
            st = json.loads(subprocess.run([WANOPT, "stats", "--json", f"--stats=127.0.0.1:{hedge}"],
                                           capture_output=True, text=True).stdout or "{}")
        finally:
            stop.set()
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    mp, mh = statistics.median(plain), statistics.median(pair)
    mr = statistics.median(relay) if relay else None
    res = dict(size=SIZE, trials=TRIALS, cold_s=cold, plain_s=plain, relay_s=relay, pair_hot_s=pair,
               plain_MBps=SIZE / mp / 1e6, pair_hot_MBps=SIZE / mh / 1e6, ratio=mp / mh,
               ratio_to_relay=mr / mh if mr else None, edge_totals=st.get("totals", st))
    relay_row = f"| a relay that only copies bytes (bench/byterelay.c) | {mr:.3f} | {SIZE / mr / 1e6:.0f} |\n" if mr else ""
    relay_line = (f"Byte relay speed / plain TCP speed: {mp / mr:.2f} (what the extra hop costs)  \n"
                  f"Pair (hot) speed / byte relay speed: {mr / mh:.2f} (what wanopt's work on the bytes costs)\n") if mr else ""
    md = (f"# Proxy benchmark: loopback\n\n{SIZE >> 20} MiB download; median of {TRIALS}; same client and server.\n\n"
          f"| path | seconds | MB/s |\n|---|---|---|\n"
          f"| plain TCP | {mp:.3f} | {SIZE / mp / 1e6:.0f} |\n" + relay_row +
          f"| through the pair, cold (first time) | {cold:.3f} | {SIZE / cold / 1e6:.0f} |\n"
          f"| through the pair, hot (repeated data) | {mh:.3f} | {SIZE / mh / 1e6:.0f} |\n\n"
          f"Pair (hot) speed / plain TCP speed: **{mp / mh:.2f}** (target: >= 1.00)\n\n" + relay_line)
    os.makedirs(os.path.join(ROOT, "results"), exist_ok=True)
    with open(os.path.join(ROOT, "results", "proxy-loopback.md"), "w") as f:
        f.write(md)
    with open(os.path.join(ROOT, "results", "proxy-loopback.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(md)


if __name__ == "__main__":
    main()
