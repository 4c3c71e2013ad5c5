#!/usr/bin/env bash
# make bench-proxy: the pair against plain TCP on loopback (bench/proxy_bench.py),
# then the reference transfer over an emulated T1 (netem/bench) when available.
set -eu
cd "$(dirname "$0")/.."
timeout -k 10 "${BENCH_TIMEOUT:-900}" python3 bench/proxy_bench.py
if [ -x netem/bench ]; then
	timeout -k 10 "${BENCH_TIMEOUT:-900}" netem/bench --proxy t1
fi
