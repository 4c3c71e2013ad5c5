#!/usr/bin/env bash
# scripts/demo.sh (`make demo`): on a fresh Debian 12 machine, as root: installs what
# is missing, builds, brings up an emulated T1 (1.544 Mbit/s, 40 ms round trip)
# between a branch and a datacenter namespace, downloads the reference file
# (3,367,936 bytes) without wanopt, then through wanopt cold and hot, prints
# the table and tears everything down.  A few minutes at most.
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "demo: run as root (it creates network namespaces)" >&2; exit 1; }
bash scripts/deps.sh
make -s all
cat <<'TXT'

wanopt demo: a branch and a datacenter joined by an emulated T1 link

   branch (netns)                                  datacenter (netns)
   client -> wanopt edge  ====== T1 link ======>  wanopt core -> file server
   10.77.0.1              1.544 Mbit/s, 40 ms RTT  10.77.0.2

(1) no optimizer, (2) wanopt with a cold cache, (3) wanopt hot (the same file again).

TXT
export WNM_PREFIX=wnm-demo$$-  # its own namespaces: two demos at once do not collide
exec netem/bench t1 --files=ref --dirs=down --scenarios=1,2,3 --max-time=90 --live=0 --out=results/demo
