#!/usr/bin/env python3
"""pxhold.py: many connections held open at once, for the wanopt scale tests.

  pxhold.py HOST PORT COUNT SEED [--sizes=A,B] [--again=SIZE] [--hold=SECS]
            [--ready=FILE] [--timeout=SECS] [--any]

Opens COUNT connections to a pxtool server (through a proxy), at most 100
connecting at a time.  On each it starts an ECHO and has each message of
--sizes (gen(SEED + i, size) for connection i) echoed back exactly, in turn.
The connections that got there stay open; FILE is then written with
"held H refused R failed F", and after --hold seconds each held connection
echoes one more message of --again bytes.  Refused: closed or reset before
its first echo (as a proxy at its stream limit does).  Failed: anything else
(timeout, a short or wrong echo).  Prints "ok held=H refused=R ..." and exits
0 when nothing failed (with --any: whatever happened).
"""
import argparse
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pxtool import gen  # noqa: E402


def data(seed, size):
    return b"".join(gen(seed, size))


async def echo(r, w, msg, timeout):
    w.write(msg)
    await w.drain()
    got = await asyncio.wait_for(r.readexactly(len(msg)), timeout)
    if got != msg:
        raise ValueError("echo differs")


async def one(a, i, sem, held, counts):
    async with sem:
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(a.host, a.port), a.timeout)
        except (ConnectionResetError, ConnectionRefusedError):
            counts["refused"] += 1  # reset as it was accepted: the proxy's refusal
            return
        except (OSError, asyncio.TimeoutError) as e:
            counts["failed"] += 1
            if counts["failed"] <= 3 and not a.any:
                print("connection %d: connect: %r" % (i, e), flush=True)
            return
        try:
            w.write(b"ECHO\n")
            first = True
            for size in a.sizes:
                await echo(r, w, data(a.seed + i, size), a.timeout)
                first = False
            held.append((i, r, w))
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            refused = first and not getattr(e, "partial", b"")
            counts["refused" if refused else "failed"] += 1
            if not refused and counts["failed"] <= 3 and not a.any:
                print("connection %d: %r" % (i, e), flush=True)
            w.close()
        except (OSError, ValueError, asyncio.TimeoutError) as e:
            counts["failed"] += 1
            if counts["failed"] <= 3 and not a.any:
                print("connection %d: %r" % (i, e), flush=True)
            w.close()


async def again(a, i, r, w):
    try:
        await echo(r, w, data(a.seed + 100000 + i, a.again), a.timeout)
        return True
    except (OSError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        return False


async def main_async(a):
    sem = asyncio.Semaphore(100)
    held, counts = [], {"refused": 0, "failed": 0}
    await asyncio.gather(*(one(a, i, sem, held, counts) for i in range(a.count)))
    line = "held %d refused %d failed %d" % (len(held), counts["refused"], counts["failed"])
    if a.ready:
        with open(a.ready + ".tmp", "w") as f:
            f.write(line + "\n")
        os.rename(a.ready + ".tmp", a.ready)
    await asyncio.sleep(a.hold)
    ok = await asyncio.gather(*(again(a, i, r, w) for i, r, w in held)) if a.again else []
    for _, _, w in held:
        w.close()
    bad = counts["failed"] + sum(1 for x in ok if not x)
    print("%s held=%d refused=%d failed=%d again_failed=%d" %
          ("ok" if not bad or a.any else "error", len(held), counts["refused"], counts["failed"],
           sum(1 for x in ok if not x)), flush=True)
    return 0 if not bad or a.any else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("count", type=int)
    p.add_argument("seed", type=int)
    p.add_argument("--sizes", default="20,4096", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--again", type=int, default=100)
    p.add_argument("--hold", type=float, default=0)
    p.add_argument("--ready")
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--any", action="store_true")
    sys.exit(asyncio.run(main_async(p.parse_args())))


if __name__ == "__main__":
    main()
