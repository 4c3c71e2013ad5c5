#!/usr/bin/env python3
"""pxtool.py: clients and a server for the wanopt end-to-end tests (stdlib only).

Test data is generated from a seed, 64 KiB block by block, so that a client
and a server (or a file given to `wanopt warm`) agree on it without sharing
anything but (seed, size).  Each block is random, English-like text or a
short repeated pattern, chosen by the seed: a mix that LZ and DRE both have
work to do on, and that never repeats within or across seeds.  Seeds from
SPARSE up stand for a sparse disk image: every other block is all zeros.

Server protocol (one request line per connection, then the body):
  GET SEED SIZE [RATE]  the server sends gen(SEED, SIZE) (RATE bytes/s if given)
                        and half-closes
  PUT                   the client sends its bytes and half-closes; the server
                        answers "LEN SHA256\\n" and closes
  ECHO                  every byte comes back until the client half-closes
  TAKE FILE             the server answers "ready", half-closes, then reads the
                        client's bytes until EOF and writes "LEN SHA256" to FILE
  STALL SECS            as PUT, but the server reads nothing for SECS first
  SINK FILE             the server answers "ready", reads until EOF or an error
                        and writes to FILE "eof LEN" or "reset LEN" (what it
                        saw, and the bytes before it)
  PEER                  the server answers with the address it sees
Every client command prints one result line; the first word is the outcome:
ok, short (clean EOF too early), reset, timeout, refused, mismatch, error.
Exit status 0 only for ok.  PX_DSCP=N in the environment marks the clients'
connections with DSCP N.
"""
import argparse
import errno
import collections
import functools
import hashlib
import os
import random
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time

from pxraw import cmd_backlog, cmd_rawtls  # noqa: E402 (beside this file)

BLOCK = 1 << 16
WORDS = (b"the of and to in is was that for on with as by at from his her which or had are but not have "
         b"this were they been one all their there would will what when who more no if out so said up its "
         b"about into than them can only other new some could time these two may then do first any my now "
         b"such like our over man me even most made after also did many before must through back years "
         b"where much your way well down should because each just those people how too little state good "
         b"very make world still own see men work long get here between both life being under never day "
         b"same another know while last might us great old year off come since against go came right used "
         b"replication snapshot backup volume datastore branch office tunnel segment chunk").split()


SPARSE = 900


@functools.lru_cache(maxsize=64)
def block(seed, i):
    """Block i of the stream for seed (BLOCK bytes)."""
    if seed >= SPARSE and i % 2:
        return bytes(BLOCK)
    r = random.Random(seed * 1000003 + i)
    kind = r.randrange(4)
    if kind < 2:
        return r.randbytes(BLOCK)
    if kind == 2:
        b = b" ".join(r.choices(WORDS, k=BLOCK // 4))
        while len(b) < BLOCK:
            b += b" " + b
        return b[:BLOCK]
    pat = r.randbytes(r.randrange(1, 300))
    return (pat * (BLOCK // len(pat) + 1))[:BLOCK]


def gen(seed, size):
    """Yields the bytes of gen(seed, size) in pieces of at most BLOCK."""
    i = 0
    while size > 0:
        b = block(seed, i)
        if size < BLOCK:
            b = b[:size]
        yield b
        size -= len(b)
        i += 1


def hash_to_eof(read, size=1 << 16):
    """Call read(size) until it gives b"": (sha256 hex, bytes) of all it gave."""
    h, n = hashlib.sha256(), 0
    while True:
        b = read(size)
        if not b:
            return h.hexdigest(), n
        h.update(b)
        n += len(b)


_digests = {}
_digest_lock = threading.Lock()


def digest(seed, size):
    """sha256 hex of gen(seed, size), remembered."""
    with _digest_lock:
        if (seed, size) in _digests:
            return _digests[(seed, size)]
    h = hashlib.sha256()
    for b in gen(seed, size):
        h.update(b)
    with _digest_lock:
        _digests[(seed, size)] = h.hexdigest()
    return h.hexdigest()


# ---- server ----------------------------------------------------------------

class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        c = self.request
        c.settimeout(120)
        f = c.makefile("rb")
        line = f.readline(256).split()
        if not line:
            return
        cmd = line[0]
        print("request %s from %s" % (b" ".join(line[:3]).decode(errors="replace"), self.client_address[0]),
              flush=True)
        try:
            if cmd == b"GET":
                seed, size = int(line[1]), int(line[2])
                rate = float(line[3]) if len(line) > 3 else 0
                t0, sent = time.monotonic(), 0
                for b in gen(seed, size):
                    if rate:
                        # pace in 8 KiB steps so a rate of a few KB/s stays smooth
                        for o in range(0, len(b), 8192):
                            piece = b[o:o + 8192]
                            c.sendall(piece)
                            sent += len(piece)
                            ahead = sent / rate - (time.monotonic() - t0)
                            if ahead > 0:
                                time.sleep(ahead)
                    else:
                        c.sendall(b)
                c.shutdown(socket.SHUT_WR)
                f.read()  # until the client closes: no RST for unread bytes
            elif cmd == b"PUT":
                hd, n = hash_to_eof(f.read1)
                c.sendall(b"%d %s\n" % (n, hd.encode()))
                c.shutdown(socket.SHUT_WR)
            elif cmd == b"ECHO":
                while True:
                    b = f.read1(1 << 16)
                    if not b:
                        break
                    c.sendall(b)
                c.shutdown(socket.SHUT_WR)
            elif cmd == b"TAKE":
                # half-close first, then take the client's bytes: the verdict
                # goes to the file named in the request
                c.sendall(b"ready\n")
                c.shutdown(socket.SHUT_WR)
                hd, n = hash_to_eof(f.read1)
                path = line[1].decode()
                with open(path + ".tmp", "w") as out:
                    out.write("%d %s\n" % (n, hd))
                os.rename(path + ".tmp", path)
            elif cmd == b"STALL":
                # a slow receiver: read nothing for a while, then as PUT
                time.sleep(float(line[1]))
                hd, n = hash_to_eof(f.read1)
                c.sendall(b"%d %s\n" % (n, hd.encode()))
                c.shutdown(socket.SHUT_WR)
            elif cmd == b"SINK":
                n, end = 0, "eof"
                try:
                    c.sendall(b"ready\n")
                    while True:
                        b = f.read1(1 << 16)
                        if not b:
                            break
                        n += len(b)
                except OSError:
                    end = "reset"
                path = line[1].decode()
                with open(path + ".tmp", "w") as out:
                    out.write("%s %d\n" % (end, n))
                os.rename(path + ".tmp", path)
            elif cmd == b"PEER":
                c.sendall(("%s\n" % self.client_address[0]).encode())
                c.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the client went away: its own result says what happened


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


class Server6(Server):
    address_family = socket.AF_INET6

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def cmd_server(a):
    cls = Server6 if ":" in a.host else Server
    srv = cls((a.host, a.port), Handler)
    if a.portfile:
        tmp = a.portfile + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % srv.server_address[1])
        os.rename(tmp, a.portfile)
    srv.serve_forever()


# ---- clients -----------------------------------------------------------------

def connect(host, port, timeout):
    """A connected socket; with PX_DSCP=N in the environment, its packets
    (the SYN too) carry DSCP N."""
    dscp = int(os.environ.get("PX_DSCP", "0"))
    if not dscp:
        return socket.create_connection((host, port), timeout=timeout)
    fam, typ, proto, _, addr = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
    c = socket.socket(fam, typ, proto)
    try:
        if fam == socket.AF_INET6:
            c.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, dscp << 2)
        c.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dscp << 2)
        c.settimeout(timeout)
        c.connect(addr)
    except BaseException:
        c.close()
        raise
    return c


def classify(e):
    if isinstance(e, socket.timeout):
        return "timeout"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "reset"
    # a connected socket that a RST closed: shutdown() then fails with ENOTCONN
    if isinstance(e, OSError) and e.errno == errno.ENOTCONN:
        return "reset"
    return "error"


def do_get(host, port, seed, size, timeout, rate=0, progress=None):
    """Download gen(seed, size); returns (outcome, detail)."""
    t0, n, h = time.monotonic(), 0, hashlib.sha256()
    try:
        with connect(host, port, timeout) as c:
            c.sendall(b"GET %d %d%s\n" % (seed, size, b" %d" % rate if rate else b""))
            while True:
                b = c.recv(1 << 16)
                if not b:
                    break
                h.update(b)
                if progress and n < 65536 <= n + len(b):
                    open(progress, "w").write("started\n")
                n += len(b)
                if n > size:
                    return "mismatch", "more bytes than sent (%d > %d)" % (n, size)
    except OSError as e:
        return classify(e), "after %d of %d bytes in %.2f s: %s" % (n, size, time.monotonic() - t0, e)
    dt = time.monotonic() - t0
    if n < size:
        return "short", "EOF after %d of %d bytes in %.2f s" % (n, size, dt)
    if h.hexdigest() != digest(seed, size):
        return "mismatch", "sha256 of %d bytes differs" % n
    return "ok", "%d bytes in %.2f s" % (n, dt)


def do_put(host, port, seed, size, timeout):
    """Upload gen(seed, size), half-close, read the server's verdict."""
    t0 = time.monotonic()
    try:
        with connect(host, port, timeout) as c:
            c.sendall(b"PUT\n")
            for b in gen(seed, size):
                c.sendall(b)
            c.shutdown(socket.SHUT_WR)
            reply = b""
            while True:
                b = c.recv(4096)
                if not b:
                    break
                reply += b
    except OSError as e:
        return classify(e), "upload of %d bytes: %s" % (size, e)
    want = "%d %s" % (size, digest(seed, size))
    got = reply.decode(errors="replace").strip()
    if got != want:
        return ("short" if not got else "mismatch"), "server got '%s', sent '%s'" % (got, want)
    return "ok", "%d bytes up in %.2f s" % (size, time.monotonic() - t0)


def do_echo(host, port, seed, size, timeout):
    """Send gen(seed, size) while reading it back (both directions at once)."""
    t0 = time.monotonic()
    res = {}
    try:
        with connect(host, port, timeout) as c:
            def send():
                try:
                    c.sendall(b"ECHO\n")
                    for b in gen(seed, size):
                        c.sendall(b)
                    c.shutdown(socket.SHUT_WR)
                except OSError as e:
                    res["send"] = e
            t = threading.Thread(target=send, daemon=True)
            t.start()
            hd, n = hash_to_eof(c.recv)
            t.join(timeout)
            if "send" in res:
                raise res["send"]
    except OSError as e:
        return classify(e), "echo of %d bytes: %s" % (size, e)
    if n != size or hd != digest(seed, size):
        return ("short" if n < size else "mismatch"), "echo: %d of %d bytes back, sha256 %s" % (
            n, size, "matches" if hd == digest(seed, size) else "differs")
    return "ok", "%d bytes echoed in %.2f s" % (size, time.monotonic() - t0)


def do_take(host, port, seed, size, timeout, path):
    """The server half-closes first; then upload gen(seed, size)."""
    t0 = time.monotonic()
    try:
        with connect(host, port, timeout) as c:
            c.sendall(b"TAKE %s\n" % path.encode())
            got = c.makefile("rb").read()
            if got != b"ready\n":
                return "mismatch", "before the server's EOF: %r" % got[:60]
            for b in gen(seed, size):
                c.sendall(b)
            c.shutdown(socket.SHUT_WR)
            c.recv(1)
    except OSError as e:
        return classify(e), "upload after the server's half-close: %s" % e
    want = "%d %s" % (size, digest(seed, size))
    while time.monotonic() - t0 < timeout:
        if os.path.exists(path):
            got = open(path).read().strip()
            if got != want:
                return "mismatch", "server got '%s', sent '%s'" % (got, want)
            return "ok", "%d bytes up after the server's FIN in %.2f s" % (size, time.monotonic() - t0)
        time.sleep(0.05)
    return "timeout", "server never saw the end of the upload"


def do_abort(host, port, seed, size, timeout, path):
    """Upload gen(seed, size) to a SINK, then reset the connection (no FIN):
    the server must see a reset, never a clean end of the bytes."""
    t0 = time.monotonic()
    try:
        c = connect(host, port, timeout)
        c.sendall(b"SINK %s\n" % path.encode())
        if c.recv(6) != b"ready\n":
            return "mismatch", "the server did not answer ready"
        for b in gen(seed, size):
            c.sendall(b)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
    except OSError as e:
        return classify(e), "upload before the reset: %s" % e
    while time.monotonic() - t0 < timeout:
        if os.path.exists(path):
            got = open(path).read().split()
            if got[0] != "reset" or int(got[1]) > size:
                return "mismatch", "client reset after %d bytes, server saw: %s" % (size, " ".join(got))
            return "ok", "client reset after %d bytes, server saw a reset after %s" % (size, got[1])
        time.sleep(0.05)
    return "timeout", "server never saw the end of the upload"


OPS = {"get": do_get, "put": do_put, "echo": do_echo}


def report(outcome, detail):
    print(outcome, detail, flush=True)
    return 0 if outcome == "ok" else 1


def cmd_xfer(a):
    return report(*OPS[a.cmd](a.host, a.port, a.seed, a.size, a.timeout))


def cmd_take(a):
    return report(*do_take(a.host, a.port, a.seed, a.size, a.timeout, a.file))


def cmd_abort(a):
    return report(*do_abort(a.host, a.port, a.seed, a.size, a.timeout, a.file))


def cmd_slowget(a):
    return report(*do_get(a.host, a.port, a.seed, a.size, a.timeout, rate=a.rate, progress=a.progress))


def cmd_many(a):
    """count transfers at once: get, put and echo in turn, sizes from a.sizes."""
    sizes = [int(s) for s in a.sizes.split(",")]
    results = [None] * a.count
    go = threading.Barrier(a.count)

    def one(i):
        op = ("get", "put", "echo")[i % 3]
        seed = a.seed + i % 7  # some streams share data: DRE hits across streams
        size = sizes[i % len(sizes)]
        try:
            go.wait(a.timeout)
        except threading.BrokenBarrierError:
            pass
        results[i] = (op, size) + OPS[op](a.host, a.port, seed, size, a.timeout)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(a.count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.timeout + 5)
    bad = [(i, r) for i, r in enumerate(results) if not r or r[2] != "ok"]
    for i, r in bad:
        print("stream %d: %s" % (i, " ".join(map(str, r)) if r else "did not finish"))
    total = sum(r[1] for r in results if r)
    return report("ok" if not bad else "error",
                  "%d/%d streams byte-exact, %d bytes" % (a.count - len(bad), a.count, total))


def cmd_churn(a):
    """a.threads clients, each connecting again and again for a.secs and
    echoing 100 bytes a connection: ok only if every connection was taken
    and echoed intact (none refused, reset or short)."""
    counts = collections.Counter()
    lock = threading.Lock()
    end = time.monotonic() + a.secs

    def one(i):
        k = 0
        while time.monotonic() < end:
            outcome, _ = do_echo(a.host, a.port, a.seed + i * 1000 + k % 1000, 100, a.timeout)
            k += 1
            with lock:
                counts[outcome] += 1

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.secs + a.timeout + 5)
    total = sum(counts.values())
    detail = "%d connections in %.1f s: %s" % (total, a.secs, ", ".join(
        "%s %d" % kv for kv in sorted(counts.items())))
    return report("ok" if total and counts["ok"] == total else "error", detail)


def cmd_stall(a):
    """A slow receiver: stallget requests a download and reads nothing for
    a.stall seconds; stallput uploads to a server that reads nothing for
    a.stall seconds.  a.ready is written when the stall begins."""
    t0 = time.monotonic()
    try:
        with connect(a.host, a.port, a.timeout) as c:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            if a.cmd == "stallget":
                c.sendall(b"GET %d %d\n" % (a.seed, a.size))
                time.sleep(0.3)
                open(a.ready, "w").write("stalled\n")
                time.sleep(a.stall)
                hd, n = hash_to_eof(c.recv)
                if n != a.size or hd != digest(a.seed, a.size):
                    return report("mismatch", "%d of %d bytes after the stall" % (n, a.size))
                return report("ok", "%d bytes after a %.0f s stall in %.2f s" % (n, a.stall, time.monotonic() - t0))
            c.sendall(b"STALL %f\n" % a.stall)
            threading.Timer(0.3, lambda: open(a.ready, "w").write("stalled\n")).start()
            for b in gen(a.seed, a.size):
                c.sendall(b)
            c.shutdown(socket.SHUT_WR)
            got = c.makefile("rb").read().decode().strip()
    except OSError as e:
        return report(classify(e), "after %.2f s: %s" % (time.monotonic() - t0, e))
    want = "%d %s" % (a.size, digest(a.seed, a.size))
    if got != want:
        return report("mismatch", "server got '%s'" % got)
    return report("ok", "%d bytes up to a server stalled %.0f s, in %.2f s" % (a.size, a.stall, time.monotonic() - t0))


def cmd_live(a):
    """One connection held open: an ECHO round trip every a.interval seconds
    for a.seconds; every reply must be exact."""
    t0 = time.monotonic()
    n = 0
    try:
        with connect(a.host, a.port, a.timeout) as c:
            c.sendall(b"ECHO\n")
            f = c.makefile("rb")
            if a.ready:
                open(a.ready, "w").write("up\n")
            rtts = []
            while time.monotonic() - t0 < a.seconds:
                msg = b"%d %s\n" % (n, os.urandom(16).hex().encode() * (1 + n % 50))
                t1 = time.monotonic()
                c.sendall(msg)
                back = f.read(len(msg))
                rtts.append(time.monotonic() - t1)
                if back != msg:
                    return report("mismatch", "round trip %d: %r" % (n, back[:60]))
                n += 1
                time.sleep(a.interval)
            c.shutdown(socket.SHUT_WR)
            if f.read():
                return report("mismatch", "bytes after the last round trip")
    except OSError as e:
        return report(classify(e), "after %d round trips in %.2f s: %s" % (n, time.monotonic() - t0, e))
    rtts.sort()
    p95 = rtts[int(len(rtts) * 0.95)] if rtts else 0
    if a.max_p95 and p95 > a.max_p95:
        return report("slow", "%d round trips, p95 %.1f ms > %.0f ms (max %.1f ms)" % (
            n, p95 * 1000, a.max_p95 * 1000, rtts[-1] * 1000))
    return report("ok", "%d round trips over %.1f s, p95 %.1f ms, max %.1f ms" % (
        n, time.monotonic() - t0, p95 * 1000, (rtts[-1] if rtts else 0) * 1000))


def cmd_peer(a):
    try:
        with connect(a.host, a.port, a.timeout) as c:
            c.sendall(b"PEER\n")
            out = c.makefile("rb").read().decode().strip()
    except OSError as e:
        return report(classify(e), str(e))
    return report("ok" if out else "short", out)


def cmd_gen(a):
    with open(a.file, "wb") as f:
        for b in gen(a.seed, a.size):
            f.write(b)
    return 0


def cmd_digest(a):
    print(digest(a.seed, a.size))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--portfile")
    s.set_defaults(fn=cmd_server)

    def hp(q):
        q.add_argument("host")
        q.add_argument("port", type=int)
        q.add_argument("--timeout", type=float, default=30)

    for op in OPS:
        q = sub.add_parser(op)
        hp(q)
        q.add_argument("seed", type=int)
        q.add_argument("size", type=int)
        q.set_defaults(fn=cmd_xfer)
    for name, fn in (("take", cmd_take), ("abort", cmd_abort)):
        q = sub.add_parser(name)
        hp(q)
        q.add_argument("seed", type=int)
        q.add_argument("size", type=int)
        q.add_argument("file")
        q.set_defaults(fn=fn)
    q = sub.add_parser("slowget")
    hp(q)
    q.add_argument("seed", type=int)
    q.add_argument("size", type=int)
    q.add_argument("rate", type=int)
    q.add_argument("--progress")
    q.set_defaults(fn=cmd_slowget)
    q = sub.add_parser("many")
    hp(q)
    q.add_argument("count", type=int)
    q.add_argument("seed", type=int)
    q.add_argument("--sizes", default="0,1,1024,65536,300000,1048576,3000000")
    q.set_defaults(fn=cmd_many)
    q = sub.add_parser("churn")
    hp(q)
    q.add_argument("threads", type=int)
    q.add_argument("secs", type=float)
    q.add_argument("--seed", type=int, default=1)
    q.set_defaults(fn=cmd_churn)
    q = sub.add_parser("live")
    hp(q)
    q.add_argument("seconds", type=float)
    q.add_argument("--interval", type=float, default=0.05)
    q.add_argument("--ready")
    q.add_argument("--max-p95", type=float, default=0, help="seconds; fail above")
    q.set_defaults(fn=cmd_live)
    for op in ("stallget", "stallput"):
        q = sub.add_parser(op)
        hp(q)
        q.add_argument("seed", type=int)
        q.add_argument("size", type=int)
        q.add_argument("stall", type=float)
        q.add_argument("--ready", required=True)
        q.set_defaults(fn=cmd_stall)
    q = sub.add_parser("peer")
    hp(q)
    q.set_defaults(fn=cmd_peer)
    q = sub.add_parser("gen")
    q.add_argument("seed", type=int)
    q.add_argument("size", type=int)
    q.add_argument("file")
    q.set_defaults(fn=cmd_gen)
    q = sub.add_parser("digest")
    q.add_argument("seed", type=int)
    q.add_argument("size", type=int)
    q.set_defaults(fn=cmd_digest)
    q = sub.add_parser("rawtls")
    hp(q)
    q.add_argument("mode")
    q.add_argument("--cert")
    q.add_argument("--key")
    q.add_argument("--ca", required=True)
    q.add_argument("--target-port", type=int, default=9)
    q.set_defaults(fn=cmd_rawtls)
    q = sub.add_parser("backlog")
    hp(q)
    q.add_argument("--streams", type=int, default=8)
    q.add_argument("--limit-mib", type=int, default=96)
    q.add_argument("--target-addr", default="127.0.0.1")
    q.add_argument("--cert", required=True)
    q.add_argument("--key", required=True)
    q.add_argument("--ca", required=True)
    q.add_argument("--target-port", type=int, default=9)
    q.set_defaults(fn=cmd_backlog)
    a = p.parse_args()
    sys.exit(a.fn(a))


if __name__ == "__main__":
    main()
