#!/usr/bin/env bash
# make bench-dre: the DRE codec against zstd --long on three corpora (see dre_bench.py).
# Bounded to BENCH_TIMEOUT seconds (default 1200); temporary files are removed on exit.
set -eu
cd "$(dirname "$0")/.."
exec timeout -k 10 "${BENCH_TIMEOUT:-1200}" python3 bench/dre_bench.py
