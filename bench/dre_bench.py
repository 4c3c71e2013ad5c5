#!/usr/bin/env python3
"""DRE benchmark: wanopt's DRE codec against `zstd -3 --long=27` on the same data,
in the same run.  Corpora are built here from data on the machine and fixed seeds:
  (a) a tar of /usr/include, then the same tar with 2,000 random 50-byte insertions;
  (b) a tar of a larger binary tree (/usr/lib/gcc), then a copy with 2,000 edits
      (insertions, deletions, overwrites of 50 bytes);
  (c) incompressible data (an AES-CTR key stream), sent twice.
For each: encoded bytes of v1, of v2 after v1, of an unchanged repeat of v1;
encode and decode MB/s; peak RSS; the same for zstd.  Speeds are medians of
TRIALS runs, each from empty stores.  Results go to results/dre.{md,json}.
"""
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WANOPT = os.path.join(ROOT, os.environ.get("BINDIR", "bin"), "wanopt")
WORK = os.environ.get("BENCH_DIR", "/tmp/wanopt-bench")
TRIALS = int(os.environ.get("TRIALS", "3"))
ONLY = os.environ.get("CORPORA", "abc")
MB = 1e6


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def warm(path):
    """Read a file through, into the page cache."""
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(8 << 20)
        while f.readinto(buf):
            pass


def run(cmd, stdin_path, stdout_path):
    """Run cmd with files as stdin/stdout; return (wall seconds, peak RSS KiB).
    Peak RSS comes from /usr/bin/time, since a child forked from this (large)
    Python process would otherwise report the parent's pages.  Every command
    (ours, zstd's, sha256's) starts once what earlier steps wrote is on disk
    (sync): on 2 cores the kernel writing back an earlier step's gigabytes
    would otherwise take CPU from whichever command runs next.  A command's
    own writes still count: its wall time ends when it exits.  Its input is
    read once first, so every command finds it in the page cache: this VM
    pages out page cache left unused for a minute (DAMON), so the first
    command of a corpus, always ours, would otherwise read it from the disk."""
    warm(stdin_path)
    with tempfile.NamedTemporaryFile(prefix="wanopt-rss-") as rss, \
            open(stdin_path, "rb") as fi, open(stdout_path, "wb") as fo:
        os.sync()
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-q", "-f", "%M", "-o", rss.name] + cmd,
                           stdin=fi, stdout=fo, stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
        peak = int(open(rss.name).read().split()[-1] or 0)
    if p.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed: {p.stderr.decode(errors='replace').strip()}")
    return wall, peak


def make_tar(path, src):
    if not os.path.exists(path):
        log(f"  building {path} from {src}")
        subprocess.run(["tar", "-cf", path, "-C", "/", "--sort=name", src.lstrip("/")],
                       check=True, stderr=subprocess.DEVNULL)


def edit(src, dst, seed, kinds):
    """Write dst = src with 2,000 random 50-byte edits of the given kinds."""
    if os.path.exists(dst):
        return
    log(f"  editing {dst} (seed {seed})")
    r = random.Random(seed)
    data = open(src, "rb").read()
    pos = sorted(r.randrange(len(data) - 100) for _ in range(2000))
    out, last = [], 0
    for p in pos:
        if p < last:
            continue
        out.append(data[last:p])
        k = r.choice(kinds)
        new = bytes(r.randrange(256) for _ in range(50))
        if k == "ins":
            out.append(new)
            last = p
        elif k == "del":
            last = p + 50
        else:
            out.append(new)
            last = p + 50
    out.append(data[last:])
    with open(dst, "wb") as f:
        f.write(b"".join(out))


def keystream(path, size, seed):
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    log(f"  generating {size // 2**20} MiB of incompressible data")
    key = "%064x" % random.Random(seed).getrandbits(256)
    with open(path, "wb") as f:
        z = subprocess.Popen(["head", "-c", str(size), "/dev/zero"], stdout=subprocess.PIPE)
        subprocess.run(["openssl", "enc", "-aes-256-ctr", "-K", key, "-iv", "0" * 32, "-nosalt"],
                       stdin=z.stdout, stdout=f, check=True)
        z.wait()


def corpora():
    os.makedirs(WORK, exist_ok=True)
    c = []
    if "a" in ONLY:
        a1, a2 = f"{WORK}/a1.tar", f"{WORK}/a2.tar"
        make_tar(a1, "/usr/include")
        edit(a1, a2, 42, ["ins"])
        c.append(("a", "tar of /usr/include, 2,000 50-byte insertions", a1, a2))
    if "b" in ONLY:
        b1, b2 = f"{WORK}/b1.tar", f"{WORK}/b2.tar"
        make_tar(b1, "/usr/lib/gcc")
        edit(b1, b2, 7, ["ins", "del", "over"])
        c.append(("b", "tar of /usr/lib/gcc, 2,000 50-byte edits", b1, b2))
    if "c" in ONLY:
        c1 = f"{WORK}/c1.bin"
        keystream(c1, 200 << 20, 9)
        c.append(("c", "incompressible (AES-CTR stream), sent twice", c1, c1))
    return c


def wanopt_trial(v1, v2, tmp, verify):
    """One trial from empty stores: v1, v2 after v1, repeat of v1.  Timed runs
    write decoded bytes to /dev/null, as zstd -d does here; with verify, each
    step is decoded a second time into a second store and compared."""
    sa, sb, sv = f"{tmp}/enc-store", f"{tmp}/dec-store", f"{tmp}/verify-store"
    subprocess.run(["rm", "-rf", sa, sb, sv], check=True)
    res = {}
    for step, src in (("v1", v1), ("v2", v2), ("repeat", v1)):
        enc, out = f"{tmp}/{step}.dre", f"{tmp}/{step}.out"
        te, re_ = run([WANOPT, "dre", "encode", "--store", sa], src, enc)
        td, rd = run([WANOPT, "dre", "decode", "--store", sb], enc, "/dev/null")
        if verify:
            run([WANOPT, "dre", "decode", "--store", sv], enc, out)
            if subprocess.run(["cmp", "-s", src, out]).returncode != 0:
                raise SystemExit(f"bench: {step} of {src} did not round-trip")
            os.unlink(out)
        n = os.path.getsize(src)
        res[step] = dict(bytes=os.path.getsize(enc), enc_s=te, dec_s=td, rss_kib=max(re_, rd), size=n)
    return res


def zstd_trial(v1, v2, tmp):
    """zstd -3 --long=27: v1 alone, v1+v2, v1+v2+v1 (cost of a step = the growth)."""
    cat12, cat121 = f"{tmp}/v12", f"{tmp}/v121"
    subprocess.run(f"cat '{v1}' '{v2}' > {cat12}; cat '{v1}' '{v2}' '{v1}' > {cat121}", shell=True, check=True)
    res, prev = {}, 0
    for step, src in (("v1", v1), ("v2", cat12), ("repeat", cat121)):
        z = f"{tmp}/{step}.zst"
        te, re_ = run(["zstd", "-q", "-3", "--long=27", "-c"], src, z)
        td, rd = run(["zstd", "-q", "-d", "--long=27", "-c"], z, "/dev/null")
        size = os.path.getsize(z)
        res[step] = dict(bytes=size - prev, total=size, enc_s=te, dec_s=td, rss_kib=max(re_, rd),
                         size=os.path.getsize(src))
        prev = size
    os.unlink(cat12)
    os.unlink(cat121)
    return res


def sha_trial(v1, tmp):
    t, _ = run(["openssl", "dgst", "-sha256"], v1, "/dev/null")
    return t


def median_of(trials, step, key):
    return statistics.median(t[step][key] for t in trials)


def summarize(name, desc, v1, v2, tmp):
    log(f"corpus ({name}): {desc}")
    ours, theirs, sha = [], [], []
    for i in range(TRIALS):
        log(f"  trial {i + 1}/{TRIALS}: wanopt dre, zstd --long, sha256")
        ours.append(wanopt_trial(v1, v2, tmp, i == 0))
        theirs.append(zstd_trial(v1, v2, tmp))
        sha.append(sha_trial(v1, tmp))
    r = dict(corpus=name, desc=desc, v1_size=os.path.getsize(v1), v2_size=os.path.getsize(v2),
             trials=TRIALS, sha256_s=statistics.median(sha), steps={})
    for step in ("v1", "v2", "repeat"):
        size = ours[0][step]["size"]
        o = {k: median_of(ours, step, k) for k in ("enc_s", "dec_s", "rss_kib")}
        z = {k: median_of(theirs, step, k) for k in ("enc_s", "dec_s", "rss_kib")}
        zsize = theirs[0][step]["size"]
        r["steps"][step] = dict(
            input_bytes=size,
            wanopt=dict(bytes=ours[0][step]["bytes"], enc_MBps=size / o["enc_s"] / MB,
                        dec_MBps=size / o["dec_s"] / MB, rss_MiB=o["rss_kib"] / 1024),
            zstd=dict(bytes=theirs[0][step]["bytes"], enc_MBps=zsize / z["enc_s"] / MB,
                      dec_MBps=zsize / z["dec_s"] / MB, rss_MiB=z["rss_kib"] / 1024,
                      note="speeds over the whole concatenation zstd compresses at this step"),
            ratio=dict(bytes=ours[0][step]["bytes"] / max(1, theirs[0][step]["bytes"]),
                       enc_speed=(size / o["enc_s"]) / (zsize / z["enc_s"]),
                       dec_speed=(size / o["dec_s"]) / (zsize / z["dec_s"])))
    # each trial's own ratios (ours and theirs from the same trial): the spread
    # the medians hide on a noisy machine
    r["trial_ratios"] = {
        f"{step}_{k}": [(z[step][k + "_s"] / theirs[0][step]["size"]) / (o[step][k + "_s"] / ours[0][step]["size"])
                        for o, z in zip(ours, theirs)]
        for step in ("v1", "v2", "repeat") for k in ("enc", "dec")}
    r["trial_ratios"]["enc_vs_sha256"] = [t / o["v1"]["enc_s"] for o, t in zip(ours, sha)]
    r["sha256_MBps"] = r["v1_size"] / r["sha256_s"] / MB
    v1s = r["steps"]["v1"]
    r["v1_growth_pct"] = 100.0 * (v1s["wanopt"]["bytes"] / r["v1_size"] - 1)
    r["enc_vs_sha256"] = v1s["wanopt"]["enc_MBps"] / r["sha256_MBps"]
    return r


def table(results):
    lines = ["| corpus | step | input MB | wanopt bytes | zstd --long bytes | bytes ratio | "
             "wanopt enc MB/s | zstd enc MB/s | enc ratio | wanopt dec MB/s | zstd dec MB/s | dec ratio | "
             "wanopt RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for step, s in r["steps"].items():
            w, z, q = s["wanopt"], s["zstd"], s["ratio"]
            lines.append(f"| {r['corpus']} | {step} | {s['input_bytes'] / MB:.1f} | {w['bytes']:,} | "
                         f"{z['bytes']:,} | {q['bytes']:.3f} | {w['enc_MBps']:.0f} | {z['enc_MBps']:.0f} | "
                         f"{q['enc_speed']:.2f} | {w['dec_MBps']:.0f} | {z['dec_MBps']:.0f} | "
                         f"{q['dec_speed']:.2f} | {w['rss_MiB']:.0f} |")
    return "\n".join(lines)


def spread(r, key, pct=False):
    """ ', trials a-b' for a per-trial ratio list."""
    v = r.get("trial_ratios", {}).get(key)
    if not v or len(v) < 2:
        return ""
    f = (lambda x: f"{x * 100:.0f} %") if pct else (lambda x: f"{x:.2f}")
    return f"; trials {f(min(v))} to {f(max(v))}"


def checks(results):
    out = []
    for r in results:
        s = r["steps"]
        if r["corpus"] == "a":
            out.append(("(a) v2 after v1 <= zstd --long's v2 cost", s["v2"]["ratio"]["bytes"] <= 1.0,
                        f"{s['v2']['wanopt']['bytes']:,} vs {s['v2']['zstd']['bytes']:,} bytes"))
            per100 = s["repeat"]["wanopt"]["bytes"] * 100e6 / s["repeat"]["input_bytes"]
            out.append(("(a) unchanged repeat, per 100 MB, < 50 KB", per100 < 50000,
                        f"{per100:,.0f} bytes per 100 MB "
                        f"({s['repeat']['input_bytes'] / max(1, s['repeat']['wanopt']['bytes']):,.0f}:1)"))
            for step in ("v1", "v2", "repeat"):
                out.append((f"(a) {step} encode >= zstd -3 --long=27", s[step]["ratio"]["enc_speed"] >= 1.0,
                            f"ratio {s[step]['ratio']['enc_speed']:.2f}{spread(r, step + '_enc')}"))
                out.append((f"(a) {step} decode >= zstd -d", s[step]["ratio"]["dec_speed"] >= 1.0,
                            f"ratio {s[step]['ratio']['dec_speed']:.2f}{spread(r, step + '_dec')}"))
        if r["corpus"] == "c":
            out.append(("(c) incompressible grows <= 0.5 %", r["v1_growth_pct"] <= 0.5,
                        f"{r['v1_growth_pct']:+.3f} %"))
            out.append(("(c) encode >= 70 % of sha256 speed", r["enc_vs_sha256"] >= 0.7,
                        f"{r['enc_vs_sha256'] * 100:.0f} % ({s['v1']['wanopt']['enc_MBps']:.0f} vs "
                        f"{r['sha256_MBps']:.0f} MB/s{spread(r, 'enc_vs_sha256', True)})"))
            out.append(("(c) repeat dedupes", s["repeat"]["wanopt"]["bytes"] < r["v1_size"] / 1000,
                        f"{s['repeat']['wanopt']['bytes']:,} bytes"))
    return out


def main():
    if not os.access(WANOPT, os.X_OK):
        raise SystemExit(f"bench: {WANOPT} not built (run make)")
    results = []
    with tempfile.TemporaryDirectory(prefix="wanopt-bench-") as tmp:
        for name, desc, v1, v2 in corpora():
            results.append(summarize(name, desc, v1, v2, tmp))
    md = ["# DRE benchmark", "",
          f"wanopt dre encode/decode vs `zstd -3 --long=27` (v2 cost = size(v1+v2) - size(v1)); "
          f"median of {TRIALS} trials, each from empty stores; ratios are wanopt / zstd.  "
          f"Where a target gives 'trials x to y', those are the ratios of single trials (ours "
          f"against the reference timed in the same trial).", "",
          table(results), ""]
    md.append("| target | met | figure |")
    md.append("|---|---|---|")
    for what, ok, fig in checks(results):
        md.append(f"| {what} | {'yes' if ok else 'NO'} | {fig} |")
    text = "\n".join(md) + "\n"
    os.makedirs(os.path.join(ROOT, "results"), exist_ok=True)
    with open(os.path.join(ROOT, "results", "dre.md"), "w") as f:
        f.write(text)
    with open(os.path.join(ROOT, "results", "dre.json"), "w") as f:
        json.dump(dict(results=results, checks=[dict(target=a, met=b, figure=c) for a, b, c in checks(results)]),
                  f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
