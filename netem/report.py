#!/usr/bin/env python3
"""netem/report.py ROWS.jsonl --profile=P --out=DIR [--seconds=S] [--link=L]

Turns the benchmark's rows into the printed table, DIR/bench-P.md,
DIR/bench-P.json and DIR/bench-P.svg (throughput bars, log scale).
Speed-up is each row's rate over the rate of scenario (1) for the same file and
direction (for complete rows, the ratio of the times).  Glue only."""
import argparse
import datetime
import html
import json
import math
import os

LABEL = {"1": "(1) no optimizer", "legacy": "    plain TCP, 64 KiB window",
         "zstd": "    zstd -3 --long=27 pipe", "2": "(2) wanopt cold",
         "seen": "    wanopt, v1 seen", "3": "(3) wanopt hot",
         "4": "(4) wanopt pre-positioned", "5": "(5) local, no link",
         "class": "    wanopt cold, echo classified"}
FILES = {"ref": "reference file, 3,367,936 bytes", "big": "100 MiB file",
         "edit": "100 MiB file, edited second version",
         "small": "100 small files of 16 KiB, a connection each, one after the other"}
DIRS = {"down": "Download (datacenter -> branch)", "up": "Upload (branch -> datacenter)"}
COLOR = {"1": "#888888", "legacy": "#bbbbbb", "zstd": "#e0a030", "2": "#6fa8dc",
         "seen": "#3d85c6", "3": "#2a9d2a", "4": "#1b6e1b", "5": "#444444"}


def rate(r):
    """Bytes per second of a row, or None."""
    return r["bytes"] / r["seconds"] if r.get("seconds") and r.get("bytes") else None


def cells(r, base):
    """The table cells of one row: bytes, seconds, KB/s, WAN bytes, speed-up."""
    if r["status"] in ("n/a", "error"):
        na = f"n/a ({r['note']})" if r["status"] == "n/a" else f"error: {r['note']}"
        return [na, "", "", "", ""]
    rt, brt = rate(r), rate(base) if base else None
    secs = f"{r['seconds']:.2f}" if r["seconds"] >= 1 else f"{r['seconds']:.3f}"
    if r["status"] == "partial":
        secs = f">{r['seconds']:.0f} (stopped)"
    elif r["status"] == "corrupt":
        secs += " CORRUPT"
    wan = "-" if r["scenario"] == "5" else f"{r['wan_bytes']:,}"
    up = f"{rt / brt:.1f}x" if rt and brt else ""
    return [f"{r['bytes']:,}", secs, f"{rt / 1e3:.1f}" if rt else "", wan, up]


def tables(rows):
    """Yields (direction, file, [(label, cells)]) in benchmark order."""
    for d in DIRS:
        for f in FILES:
            sel = [r for r in rows if r["dir"] == d and r["file"] == f]
            if not sel:
                continue
            base = next((r for r in sel if r["scenario"] == "1" and rate(r)), None)
            yield d, f, [(LABEL[r["scenario"]], cells(r, base)) for r in sel]


HEAD = ["scenario", "bytes", "seconds", "KB/s", "WAN bytes", "speed-up vs (1)"]

LIVE_TITLE = "Interactive: a 200-byte echo every 100 ms next to a download of the 100 MiB file"
LIVE_HEAD = ["scenario", "round trips", "p50 ms", "p95 ms", "max ms", "download KB/s"]


def live_rows(rows):
    """[(label, cells)] of the interactive measurement (netem/bench --live)."""
    out = []
    for r in rows:
        if r["file"] != "live":
            continue
        e = r.get("echo") or {}
        if r["status"] != "ok":
            why = r["note"] + (f" ({e['error']})" if e.get("error") else "")
            out.append((LABEL[r["scenario"]], [f"{r['status']}: {why}", "", "", "", ""]))
            continue
        rt = rate(r)
        out.append((LABEL[r["scenario"]], [f"{e['round_trips']}", f"{e['p50_ms']:.0f}", f"{e['p95_ms']:.0f}",
                                           f"{e['max_ms']:.0f}", f"{rt / 1e3:.1f}" if rt else ""]))
    return out


def text(rows, title):
    """The table as fixed-width text."""
    out = [title]
    for d, f, t in tables(rows):
        out.append(f"\n{DIRS[d]}: {FILES[f]}")
        data = [HEAD] + [[lab] + c for lab, c in t]
        w = [max(len(r[i]) for r in data if not r[1].startswith(("n/a", "error")))
             for i in range(len(HEAD))]
        for i, r in enumerate(data):
            if r[1].startswith("n/a") or r[1].startswith("error"):
                out.append(f"  {r[0]:<{w[0]}}  {r[1]}")
            else:
                out.append("  " + "  ".join(c.ljust(w[0]) if j == 0 else c.rjust(w[j])
                                            for j, c in enumerate(r)))
            if i == 0:
                out.append("  " + "  ".join("-" * x for x in w))
    lv = live_rows(rows)
    if lv:
        out.append(f"\n{LIVE_TITLE}")
        data = [LIVE_HEAD] + [[lab.strip()] + c for lab, c in lv]
        w = [max(len(r[i]) for r in data) for i in range(len(LIVE_HEAD))]
        for i, r in enumerate(data):
            out.append("  " + "  ".join(c.ljust(w[0]) if j == 0 else c.rjust(w[j]) for j, c in enumerate(r)))
            if i == 0:
                out.append("  " + "  ".join("-" * x for x in w))
    return "\n".join(out) + "\n"


def markdown(rows, title, meta):
    """The tables as Markdown."""
    out = [f"# {title}", "", meta, ""]
    for d, f, t in tables(rows):
        out += [f"## {DIRS[d]}: {FILES[f]}", "", "| " + " | ".join(HEAD) + " |",
                "|" + "---|" * len(HEAD)]
        out += ["| " + " | ".join([lab.strip()] + c) + " |" for lab, c in t]
        out.append("")
    lv = live_rows(rows)
    if lv:
        out += [f"## {LIVE_TITLE}", "", "| " + " | ".join(LIVE_HEAD) + " |", "|" + "---|" * len(LIVE_HEAD)]
        out += ["| " + " | ".join([lab.strip()] + c) + " |" for lab, c in lv]
        out.append("")
    out += ["WAN bytes: IP bytes that crossed the emulated link, both directions, counted by the",
            "emulator (wanem) or the veth pair (tc netem). KB/s = 1000 bytes/s of file data.",
            "\"stopped\": the transfer hit the time bound; its rate is from the bytes moved by then.", ""]
    return "\n".join(out)


def svg(rows, title):
    """A horizontal bar chart of KB/s per scenario, log scale, one group per table."""
    groups = list(tables(rows))
    ok = [rate(r) for r in rows if rate(r) and r["status"] in ("ok", "partial")]
    lo = 10 ** math.floor(math.log10(min(ok) / 1e3)) if ok else 1
    hi = 10 ** math.ceil(math.log10(max(ok) / 1e3)) if ok else 1000
    hi = max(hi, lo * 10)
    x0, width, bar, y = 250, 560, 16, 50
    parts = []

    def xpos(v):
        return x0 + width * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    for d, f, _ in groups:
        parts.append(f'<text x="10" y="{y + 12}" font-weight="bold">{html.escape(DIRS[d])}: '
                     f'{html.escape(FILES[f])}</text>')
        y += 20
        sel = [r for r in rows if r["dir"] == d and r["file"] == f]
        base = next((rate(r) for r in sel if r["scenario"] == "1" and rate(r)), None)
        for r in sel:
            lab = html.escape(LABEL[r["scenario"]].strip())
            parts.append(f'<text x="{x0 - 6}" y="{y + 12}" text-anchor="end">{lab}</text>')
            rt = rate(r)
            if rt and r["status"] in ("ok", "partial"):
                w = max(1.0, xpos(rt / 1e3) - x0)
                parts.append(f'<rect x="{x0}" y="{y}" width="{w:.1f}" height="{bar}" '
                             f'fill="{COLOR[r["scenario"]]}"/>')
                note = " (stopped)" if r["status"] == "partial" else ""
                if base and r["scenario"] not in ("1", "5"):
                    note += f", {rt / base:.1f}x"
                parts.append(f'<text x="{x0 + w + 4:.1f}" y="{y + 12}">{rt / 1e3:,.1f} KB/s{note}</text>')
            else:
                parts.append(f'<text x="{x0 + 4}" y="{y + 12}" fill="#999">{html.escape(r["status"])}'
                             f' {html.escape(r["note"])}</text>')
            y += bar + 4
        y += 12
    axis = []
    v = lo
    while v <= hi * 1.0001:
        xp = xpos(v)
        axis.append(f'<line x1="{xp:.1f}" y1="40" x2="{xp:.1f}" y2="{y}" stroke="#ddd"/>'
                    f'<text x="{xp:.1f}" y="{y + 14}" text-anchor="middle">{v:g}</text>')
        v *= 10
    h = y + 40
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{x0 + width + 140}" height="{h}" '
            f'font-family="sans-serif" font-size="12">'
            f'<rect width="100%" height="100%" fill="white"/>'
            f'<text x="10" y="24" font-size="15" font-weight="bold">{html.escape(title)}</text>'
            + "".join(axis) + "".join(parts) +
            f'<text x="{x0 + width / 2}" y="{y + 32}" text-anchor="middle">KB/s (log scale)</text>'
            "</svg>\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--link", default="?")
    a = ap.parse_args()
    rows = [json.loads(x) for x in open(a.rows) if x.strip()]
    name = os.path.splitext(os.path.basename(a.profile))[0]
    title = f"wanopt benchmark, link profile {name}"
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = f"Run {when} on {os.uname().nodename}; link emulated by {a.link}; took {a.seconds} s."
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"bench-{name}")
    with open(base + ".md", "w") as f:
        f.write(markdown(rows, title, meta))
    with open(base + ".json", "w") as f:
        json.dump({"profile": name, "link": a.link, "date": when, "seconds": a.seconds,
                   "rows": rows}, f, indent=1)
    with open(base + ".svg", "w") as f:
        f.write(svg(rows, title))
    print(text(rows, title + f" ({a.link})"))
    print(f"results: {base}.md, {base}.json, {base}.svg")


if __name__ == "__main__":
    main()
