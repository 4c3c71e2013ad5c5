#!/usr/bin/env bash
# Install the Debian packages wanopt needs to build and test, if any are missing.
# Run as root on Debian 12 (apt-get); as another user it only reports what is missing.
# `deps.sh build`: only what building bin/wanopt and bin/wanem needs (plain `make`).
set -eu
pkgs="build-essential pkg-config libevent-dev libssl-dev libzstd-dev liblz4-dev"
if [ "${1:-all}" != build ]; then
	pkgs="$pkgs libcmocka-dev zstd openssl iproute2 nftables iptables python3 clang
	      libclang-rt-14-dev procps time"
fi
# make -j may run this twice at once (deps-build, deps-quiet): one at a time,
# each checking after the other has finished.
if [ "$(id -u)" = 0 ] && command -v flock >/dev/null; then
	exec 9>/run/wanopt-deps.lock && flock 9
fi
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages:$missing (run 'make deps' as root, or apt-get install them)" >&2
	exit 1
fi
echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
