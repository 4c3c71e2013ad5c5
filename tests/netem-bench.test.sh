#!/usr/bin/env bash
# netem/bench end to end on a fast link (20 Mbit/s, 20 ms): the reference file
# downloaded without optimizer, through zstd, through wanopt cold and hot (or
# "n/a" while bin/wanopt cannot run), and locally; every row complete and
# byte-exact; the 100 small files likewise (no zstd row), hot faster than
# without the pair; a 3 s echo session next to a download, without and with
# the pair; the results written as Markdown, JSON and SVG.  About 55 s.
set -u
cd "$(dirname "$0")/.."
export WNM_PREFIX="wnm-t$$-" WANEM="${BINDIR:-bin}/wanem" WANOPT="${WANOPT:-$PWD/${BINDIR:-bin}/wanopt}"
out=$(mktemp -d /tmp/wnm-bench-test.XXXXXX)
trap 'netem/testbed down >/dev/null 2>&1; rm -rf "$out" "/var/tmp/wanopt-bench/run-$WNM_PREFIX"' EXIT
netem/bench tests/netem/fast.conf --files=ref,small --dirs=down --scenarios=1,zstd,2,3,5 \
	--max-time=30 --live=3 --out="$out" || { echo "FAIL  bench exited $?"; exit 1; }
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
d = json.load(open(os.path.join(out, "bench-fast.json")))
rows = {r["scenario"]: r for r in d["rows"] if r["file"] == "ref"}
small = {r["scenario"]: r for r in d["rows"] if r["file"] == "small"}
live = {r["scenario"]: r for r in d["rows"] if r["file"] == "live"}
fail = 0
def check(ok, what):
    global fail
    print(("ok    " if ok else "FAIL  ") + what)
    fail |= not ok
check(set(rows) == {"1", "zstd", "2", "3", "5"}, f"five rows: {sorted(rows)}")
for s in ("1", "zstd", "5"):
    r = rows[s]
    check(r["status"] == "ok" and r["bytes"] == 3367936, f"({s}) complete and byte-exact: {r['status']}")
r = rows["1"]
check(r["wan_bytes"] > 3367936, f"(1) WAN bytes {r['wan_bytes']} above the file size (headers, acks)")
check(rows["zstd"]["wan_bytes"] < r["wan_bytes"] / 3, f"zstd WAN bytes {rows['zstd']['wan_bytes']} below a third")
for s in ("2", "3"):
    r = rows[s]
    check(r["status"] in ("ok", "n/a"), f"({s}) ok or n/a (proxy not built): {r['status']} {r['note']}")
if rows["3"]["status"] == "ok":
    check(rows["3"]["wan_bytes"] < rows["1"]["wan_bytes"] / 10, f"(3) hot WAN bytes {rows['3']['wan_bytes']}")
check(set(small) == {"1", "2", "3", "5"}, f"small files: four rows: {sorted(small)}")
for s, r in small.items():
    check(r["status"] == "ok" and r["bytes"] == 100 * 16384 or (s in "23" and r["status"] == "n/a"),
          f"small files ({s}) complete and byte-exact: {r['status']} {r['bytes']} {r['note']}")
if small.get("3", {}).get("status") == "ok":
    check(small["3"]["seconds"] < small["1"]["seconds"],
          f"small files hot {small['3']['seconds']:.2f} s, faster than without the pair {small['1']['seconds']:.2f} s")
check(set(live) == {"1", "2", "class"}, f"three echo sessions: {sorted(live)}")
for s, r in live.items():
    e = r.get("echo") or {}
    ok = r["status"] == "ok" and e.get("complete") and e.get("round_trips", 0) >= 10 and 0 < e["p95_ms"] < 3000 \
        and r["bytes"] > 0
    check(ok or (s != "1" and r["status"] == "n/a"), f"({s}) echo next to a download: {r['status']} {e}")
check("Interactive" in open(os.path.join(out, "bench-fast.md")).read(), "echo table in the Markdown")
for ext in ("md", "svg"):
    p = os.path.join(out, "bench-fast." + ext)
    check(os.path.getsize(p) > 500, f"{p} written")
sys.exit(fail)
PY
