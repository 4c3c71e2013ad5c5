#!/usr/bin/env bash
# bench/bound.sh (make bench-bound): what the pair's work on the bytes costs on
# loopback.  Builds a copy of the source (the files git tracks, as they are)
# with bench/bound.patch (MEASUREMENT ONLY: it can deliver wrong bytes; the
# test bench_bound checks it still applies) and runs the loopback benchmark
# (bench/proxy_bench.py) ROUNDS times in each of three modes, taking turns:
#   none  the patched build with no flag set: the product's work
#   edge  the edge neither copies stored chunks out nor checks frames
#         (WANOPT_BOUND_EDGE); the core takes no frame checksum
#   both  and the core trusts candidates without comparing (WANOPT_BOUND_CORE)
# Prints the medians (plain TCP, the byte relay, the pair) and ratios per run;
# writes results/bound-loopback.md.  The patched build lives in a temporary
# directory, removed on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
TRIALS=${TRIALS:-9}
TMP=$(mktemp -d /tmp/wanopt-bound.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
(cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$TMP"
(cd "$TMP" && git apply "$ROOT/bench/bound.patch")
echo "bound: building the measurement-only copy in $TMP"
make -s -C "$TMP" -j"$(nproc)" bin/wanopt build/bench/byterelay >/dev/null
OUT="$ROOT/results/bound-loopback.md"
mkdir -p "$ROOT/results"
{
	echo "# What the pair's work on the bytes costs (loopback, measurement-only build)"
	echo
	echo "200 MiB download, median of $TRIALS per path and run; modes taking turns (bench/bound.sh)."
	echo
	echo "| round | mode | plain TCP s | byte relay s | pair (hot) s | pair / plain | relay / plain |"
	echo "|---|---|---|---|---|---|---|"
} > "$OUT"
for r in $(seq "$ROUNDS"); do
	for m in none edge both; do
		flags=()
		case $m in
		edge) flags=(WANOPT_BOUND_EDGE=1) ;;
		both) flags=(WANOPT_BOUND_EDGE=1 WANOPT_BOUND_CORE=1) ;;
		esac
		if ! env -u WANOPT_BOUND_EDGE -u WANOPT_BOUND_CORE "${flags[@]}" TRIALS="$TRIALS" \
			timeout -k 10 600 python3 "$TMP/bench/proxy_bench.py" >/dev/null 2>"$TMP/bench.log"; then
			tail -n 20 "$TMP/bench.log" >&2
			exit 1
		fi
		python3 - "$TMP/results/proxy-loopback.json" "$r" "$m" <<'PY' | tee -a "$OUT"
import json, statistics as s, sys
j = json.load(open(sys.argv[1]))
p, h = s.median(j["plain_s"]), s.median(j["pair_hot_s"])
rl = s.median(j["relay_s"]) if j["relay_s"] else float("nan")
print(f"| {sys.argv[2]} | {sys.argv[3]} | {p:.3f} | {rl:.3f} | {h:.3f} | {p / h:.2f} | {p / rl:.2f} |")
PY
	done
done
echo "bound: results in $OUT"
