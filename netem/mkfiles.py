#!/usr/bin/env python3
"""netem/mkfiles.py DIR [ref] [big] [edit]: the benchmark's files, made once and kept in DIR.

  ref.bin     3,367,936 bytes: the start of a tar of /usr/include (source text,
              like the reference benchmark's FTP file)
  big.bin     100 MiB: a tar of about 25 MiB each of /usr/bin, /usr/lib,
              /usr/share and /usr/include (programs, libraries, documentation
              with its already-compressed files, source text), cut at 100 MiB
  big-v2.bin  big.bin after 60 seeded edits (replace, insert, delete; a few KB
              each, about 0.2 % of the file): the "edited second version"

The tars are made with sorted names and fixed owners and times, so a host
always gets the same files.  Glue only: the product does not use this."""
import os
import random
import subprocess
import sys
import threading

REF_SIZE = 3367936
BIG_SIZE = 100 * 1024 * 1024


VERSION = "4"      # bump when the recipe changes: cached files are then rebuilt
MIX = ["bin", "lib", "share", "include"]


def pick(top, quota):
    """Regular files under /usr/<top> (none above quota/8), in name order, until
    quota bytes; paths relative to /usr."""
    got, total = [], 0
    for d, subdirs, files in os.walk(os.path.join("/usr", top)):
        subdirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > quota // 8:
                continue    # one huge library must not fill a directory's share alone
            got.append(os.path.relpath(p, "/usr"))
            total += os.path.getsize(p)
            if total >= quota:
                return got
    return got


def tar_prefix(dirs, size, out, listed=False):
    """Writes the first size bytes of a reproducible tar of /usr/<dirs> to out
    (dirs are file paths to archive in the given order if listed)."""
    cmd = ["tar", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner",
           "--ignore-failed-read", "-cf", "-", "-C", "/usr"]
    cmd += (["--no-recursion", "--verbatim-files-from", "-T", "-"] if listed else
            ["--sort=name"] + dirs)
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    if listed:
        threading.Thread(target=feed, args=(p.stdin, dirs), daemon=True).start()
    else:
        p.stdin.close()
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


def feed(pipe, names):
    """Writes names, one per line, to tar's stdin."""
    try:
        pipe.write("".join(n + "\n" for n in names).encode())
        pipe.close()
    except OSError:
        pass    # tar had enough


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
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    if len(sys.argv) < 2 or sys.argv[1].startswith("-") or not set(sys.argv[2:]) <= {"ref", "big", "edit"}:
        sys.exit("usage: mkfiles.py DIR [ref] [big] [edit]   (default: all three)")
    d, want = sys.argv[1], set(sys.argv[2:]) or {"ref", "big", "edit"}
    os.makedirs(d, exist_ok=True)
    ref, big, v2 = (os.path.join(d, x) for x in ("ref.bin", "big.bin", "big-v2.bin"))
    ver = os.path.join(d, "VERSION")
    if not os.path.exists(ver) or open(ver).read().strip() != VERSION:
        for f in (ref, big, v2, ver):
            if os.path.exists(f):
                os.unlink(f)
        with open(ver, "w") as f:
            f.write(VERSION + "\n")
    if not os.path.exists(ref):
        tar_prefix(["include"], REF_SIZE, ref)
    if want == {"ref"}:
        return
    if not os.path.exists(big):
        # about a quarter each; the last directory gets extra so the cut falls in it
        quota = [BIG_SIZE // len(MIX) - (512 << 10)] * (len(MIX) - 1) + [BIG_SIZE // 2]
        names = [n for top, q in zip(MIX, quota) for n in pick(top, q)]
        tar_prefix(names, BIG_SIZE, big, listed=True)
    if not os.path.exists(v2):
        edit(big, v2)


if __name__ == "__main__":
    main()
