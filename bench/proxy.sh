#!/usr/bin/env bash
# make bench-proxy: the pair against plain TCP on loopback (bench/proxy_bench.py),
# then the reference transfer over an emulated T1 (netem/bench) when available.
set -eu
cd "$(dirname "$0")/.."
timeout -k 10 "${BENCH_TIMEOUT:-900}" python3 bench/proxy_bench.py
# the reference transfer over an emulated T1: no optimizer, zstd pipe, cold, hot
timeout -k 10 "${BENCH_TIMEOUT:-900}" bash netem/bench t1 --files=ref --dirs=down,up \
	--scenarios=1,zstd,2,3 --out=results/proxy
