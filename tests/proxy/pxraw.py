"""pxraw.py: a raw tunnel peer for the wanopt end-to-end tests (stdlib only):
TLS to a core's tunnel port, then hand-made frames (include/proto.h): a
misbehaving peer (pxtool rawtls) and one that makes decoders wait while it
sends (pxtool backlog)."""
import random
import socket
import ssl
import struct
import time

# ---- raw tunnel peer ------------------------------------------------------------
# Frame header: type u8, flags u8, length u16, stream id u32 (include/proto.h).

HELLO, OPEN, DATA, CREDIT, GOAWAY = 1, 2, 3, 6, 11


def frame(ftype, sid, payload, flags=0, length=None):
    return struct.pack(">BBHI", ftype, flags, len(payload) if length is None else length, sid) + payload


def hello(role=1, name=b"e2e-raw", window=1 << 20, vmin=1, vmax=1):
    return frame(HELLO, 0, struct.pack(">IHHIIIBB", 0x574F5054, vmin, vmax, 0xF, window, 4096, role, len(name))
                 + b"\0" * 16 + name)


def open_v4(sid, port, policy=2, addr="127.0.0.1"):
    return frame(OPEN, sid, struct.pack(">BBHBB", policy, 0, port, 4, 4) + socket.inet_aton(addr))


def malformed(mode, port):
    """The bytes a misbehaving peer sends after the TLS handshake."""
    rnd = random.Random(7)
    if mode == "garbage":  # no HELLO at all
        return rnd.randbytes(5000)
    if mode == "hello":  # a well-formed peer (the control)
        return hello()
    if mode == "badversion":  # versions this build does not speak
        return hello(vmin=90, vmax=99)
    if mode == "badmagic":
        h = bytearray(hello())
        h[8] ^= 0xFF
        return bytes(h)
    if mode == "badtype":
        return hello() + frame(99, 1, b"x")
    if mode == "oversize":  # a length above PROTO_MAX_PAYLOAD
        return hello() + frame(DATA, 1, b"", length=0xFFFF) + rnd.randbytes(0xFFFF)
    if mode == "badflags":
        return hello() + open_v4(1, port) + frame(DATA, 1, b"abc", flags=0x80)
    if mode == "unopened":  # DATA on a stream never opened
        return hello() + frame(DATA, 7, b"hello")
    if mode == "evensid":  # the client opening a server-side (even) stream id
        return hello() + open_v4(2, port)
    if mode == "truncated":  # a header cut short, then the peer vanishes
        return hello() + frame(DATA, 1, b"abcdef")[:5]
    raise SystemExit("unknown mode " + mode)


RESET, ACK, PING, PONG = 5, 8, 9, 10


def varint(v):
    out = b""
    while True:
        b, v = v & 0x7F, v >> 7
        if not v:
            return out + bytes([b])
        out += bytes([b | 0x80])


def dre_frame(ops, lits, raw_len):
    """A DRE data frame (dre_proto.h): magic, type 1, lengths, no LZ, checksum 0."""
    return (bytes([0xD7, 1]) + varint(raw_len) + varint(len(ops)) + varint(len(lits)) + b"\0"
            + varint(len(lits)) + struct.pack("<Q", 0) + ops + lits)


def cmd_backlog(a):
    """A peer with valid edge credentials opens a.streams FULL streams, makes
    each decoder wait for a LEARN it never sends (a reference to a chunk no one
    stored), then sends literal frames on all of them as fast as the core
    grants credit, a.limit_mib MiB at most on each, and waits until each
    stream is reset (or a.timeout).
    Prints "reset R/N streams (codes ...) after M MiB in S s"."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(a.ca)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.check_hostname = False
    c = ctx.wrap_socket(socket.create_connection((a.host, a.port), timeout=a.timeout), server_hostname="localhost")
    c.sendall(hello(vmax=3))
    buf, t0 = b"", time.monotonic()
    credit, codes, sent = {}, {}, 0

    def take(block):
        nonlocal buf
        c.settimeout(0.5 if block else 0)
        try:
            got = c.recv(1 << 16)
            if not got:
                raise SystemExit("closed by the core after %d MiB" % (sent >> 20))
            buf += got
        except (ssl.SSLWantReadError, BlockingIOError, socket.timeout):
            pass
        finally:
            c.settimeout(a.timeout)  # sends block
        while len(buf) >= 8:
            t, _, n, sid = struct.unpack(">BBHI", buf[:8])
            if len(buf) < 8 + n:
                break
            pl, buf = buf[8:8 + n], buf[8 + n:]
            if t == HELLO and not credit:
                for i in range(a.streams):
                    credit[2 * i + 1] = struct.unpack(">I", pl[12:16])[0]
            elif t == CREDIT and sid in credit:
                credit[sid] += struct.unpack(">I", pl)[0]
            elif t == ACK and sid in credit:
                credit[sid] += struct.unpack(">QI", pl)[1]
            elif t == RESET and sid in credit:
                codes[sid] = struct.unpack(">I", pl)[0]
            elif t == PING:
                c.sendall(frame(PONG, 0, pl))

    while not credit:
        take(True)
    lit = random.Random(5).randbytes(16000)
    body = b"WDRE" + bytes([3, 0]) + struct.pack("<Q", 0)  # the stream header, then the wait
    body += dre_frame(b"\x03" + b"\x22" * 8, b"", 4096)
    pend = {sid: body for sid in credit}
    for sid in credit:
        c.sendall(open_v4(sid, a.target_port, policy=0, addr=a.target_addr))
    per = {sid: 0 for sid in credit}
    lframe = dre_frame(b"\x01" + varint(len(lit)), lit, len(lit))
    while time.monotonic() - t0 < a.timeout and len(codes) < len(credit):
        live = [sid for sid in credit if sid not in codes and (pend[sid] or per[sid] < a.limit_mib << 20)]
        moved = False
        for sid in live:
            if not pend[sid]:
                pend[sid] = lframe[:(a.limit_mib << 20) - per[sid]]
            n = min(len(pend[sid]), credit[sid], 16384)
            if n > 0:
                c.sendall(frame(DATA, sid, pend[sid][:n]))
                pend[sid], credit[sid], per[sid], sent = pend[sid][n:], credit[sid] - n, per[sid] + n, sent + n
                moved = True
        take(not moved)
    print("reset %d/%d streams (codes %s) after %d MiB in %.1f s" % (
        len(codes), a.streams, ",".join(str(v) for v in sorted(set(codes.values()))) or "-", sent >> 20,
        time.monotonic() - t0), flush=True)
    return 0


def cmd_rawtls(a):
    """Connect to a core's tunnel port with a TLS client (or plain TCP for
    mode "plain") and send a.mode's bytes; print "closed ..." if the core ended
    the connection within a.timeout, "open ..." if it kept it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(a.ca)
    if a.cert:
        ctx.load_cert_chain(a.cert, a.key)
    ctx.check_hostname = False
    t0 = time.monotonic()
    got = b""
    try:
        with socket.create_connection((a.host, a.port), timeout=a.timeout) as raw:
            if a.mode == "plain":  # not TLS at all
                c = raw
                data = random.Random(3).randbytes(3000)
            else:
                c = ctx.wrap_socket(raw, server_hostname="localhost")
                data = malformed(a.mode, a.target_port)
            try:
                c.sendall(data)
                if a.mode == "truncated":
                    socket.socket.shutdown(c, socket.SHUT_WR)  # TCP FIN under the TLS layer
            except OSError:
                pass  # the core may cut us off while we still write
            # a well-formed peer is kept: watch it for a moment only
            end = t0 + (1.5 if a.mode == "hello" else a.timeout)
            while True:
                if time.monotonic() >= end:
                    raise socket.timeout()
                c.settimeout(end - time.monotonic())
                b = c.recv(1 << 16)
                if not b:
                    break
                got += b
    except socket.timeout:
        closed = None
    except (ssl.SSLError, OSError) as e:
        closed = "closed (%s: %s)" % (e.__class__.__name__, str(e)[:80])
    else:
        closed = "closed (EOF)"
    # Walk the frames the core sent: HELLO, perhaps a GOAWAY with a code.
    frames, off = [], 0
    while off + 8 <= len(got):
        t, _, n, sid = struct.unpack(">BBHI", got[off:off + 8])
        p = got[off + 8:off + 8 + n]
        frames.append("GOAWAY(code %d: %s)" % (struct.unpack(">I", p[4:8])[0], p[8:].decode(errors="replace"))
                      if t == GOAWAY and len(p) >= 8 else "type%d" % t)
        off += 8 + n
    print("%s %s after %.2f s; frames from the core: %s" % (
        closed or "open (still)", a.mode, time.monotonic() - t0,
        ", ".join(frames) or "none"), flush=True)
    return 0
