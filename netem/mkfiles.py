#!/usr/bin/env python3
"""netem/mkfiles.py DIR: the benchmark's files, made once and kept in DIR.

  ref.bin     3,367,936 bytes: the start of a tar of /usr/include (source text,
              like the reference benchmark's FTP file)
  big.bin     100 MiB: a tar of /usr/include, /usr/share and /usr/lib (text,
              binaries, already-compressed files), cut at 100 MiB
  big-v2.bin  big.bin after 60 seeded edits (replace, insert, delete; a few KB
              each, about 0.2 % of the file): the "edited second version"

The tars are made with sorted names and fixed owners and times, so a host
always gets the same files.  Glue only: the product does not use this."""
import os
import random
import subprocess
import sys

REF_SIZE = 3367936
BIG_SIZE = 100 * 1024 * 1024


def tar_prefix(dirs, size, out):
    """Writes the first size bytes of a reproducible tar of /usr/<dirs> to out."""
    cmd = ["tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner",
           "--ignore-failed-read", "-cf", "-", "-C", "/usr"] + dirs
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    left = size
    with open(out + ".tmp", "wb") as f:
        while left:
            b = p.stdout.read(min(left, 1 << 20))
            if not b:
                break
            f.write(b)
            left -= len(b)
    p.kill()
    p.wait()
    if left:
        os.unlink(out + ".tmp")
        sys.exit(f"mkfiles: the tar of /usr/{' /usr/'.join(dirs)} is smaller than {size} bytes")
    os.rename(out + ".tmp", out)


def edit(src, out, seed=3, n=60):
    """Writes src with n seeded edits (replace, insert or delete a few KB) to out."""
    data = open(src, "rb").read()
    rng = random.Random(seed)
    pos = sorted(rng.randrange(len(data)) for _ in range(n))
    parts, last = [], 0
    for p in pos:
        if p < last:
            continue
        parts.append(data[last:p])
        kind, k = rng.choice(("replace", "insert", "delete")), rng.randint(16, 4096)
        if kind != "delete":
            parts.append(rng.randbytes(k))
        last = p + (k if kind != "insert" else 0)
    parts.append(data[last:])
    with open(out + ".tmp", "wb") as f:
        f.write(b"".join(parts))
    os.rename(out + ".tmp", out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: mkfiles.py DIR")
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    ref, big, v2 = (os.path.join(d, x) for x in ("ref.bin", "big.bin", "big-v2.bin"))
    if not os.path.exists(ref):
        tar_prefix(["include"], REF_SIZE, ref)
    if not os.path.exists(big):
        tar_prefix(["include", "share", "lib"], BIG_SIZE, big)
    if not os.path.exists(v2):
        edit(big, v2)


if __name__ == "__main__":
    main()
