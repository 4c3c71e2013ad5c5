#!/usr/bin/env bash
# proxy_lossy.test.sh: the pair over the reference benchmark's long link
# (netem profile highlat: 3 Mbit/s, 300 ms RTT, 0.2 % loss each way, emulated
# by bin/wanem in the netem testbed), under a saturating upload.
#
# A lost segment holds every frame behind it until the retransmission
# arrives, on a link whose queue already holds a round trip's worth: the
# edge's keepalive replies then come later than its 0.7 s timeout, while
# the core's TCP keeps acknowledging.  An edge that judged the tunnel by
# frames alone tore it down, resetting the transfer, within 10-20 s of a
# saturating upload (every run of this test, and the benchmark's 100 MB
# uploads).  Here a warm push of 7 MiB of random bytes and an upload must
# cross whole, with the tunnel up throughout.  A dead path is still noticed
# within a second (proxy_netns blackholes one), and so, within 4 s, is a core
# frozen (SIGSTOP) under a saturating upload over this link: its kernel goes
# on acknowledging until its buffers fill, and TCP goes on repairing losses.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 0; }
[ -x "${BINDIR:-bin}/wanem" ] || { echo "SKIP: no wanem"; exit 0; }
export WNM_PREFIX="wnm-l$$-"
export WANEM="${BINDIR:-bin}/wanem"
tb_cleanup() { netem/testbed down >/dev/null 2>&1 || true; }
CLEANUP_HOOK=tb_cleanup
px_setup
netem/testbed up highlat >/dev/null
x() { netem/testbed exec "$@"; }
nsrun() {  # NAME NS COMMAND...
	local n=$1 ns=$2
	shift 2
	netem/testbed exec "$ns" "$@" >>"$T/$n.log" 2>&1 &
	PID[$n]=$!
}

nsrun srv dc python3 "$PXTOOL" server --host=10.77.0.2 --port=8080
nsrun core dc "$BIN" core --listen=10.77.0.2:7000 --allow=10.77.0.2/32 --store="$T/core.store" \
	--tls_cert="$T/pki/core.crt" --tls_key="$T/pki/core.key" --tls_ca="$T/pki/ca.crt" --link_rate=3M --link_rtt=300ms
px_wait_log core "tunnel listener on" 10
nsrun edge branch "$BIN" edge --peer=10.77.0.2:7000 --forward="127.0.0.1:9080 -> 10.77.0.2:8080" \
	--store="$T/edge.store" --tls_cert="$T/pki/edge.crt" --tls_key="$T/pki/edge.key" --tls_ca="$T/pki/ca.crt" \
	--link_rate=3M --link_rtt=300ms --stats=127.0.0.1:7102
px_wait_log edge "tunnel up" 20

# incompressible data: about 10 s of each at the link's rate
head -c $((7 << 20)) /dev/urandom >"$T/random.bin"
if out=$(x branch timeout -k 2 60 "$BIN" warm --stats=127.0.0.1:7102 "$T/random.bin" 2>&1); then
	ok "warm of 7 MiB over highlat: $out"
else
	fail "warm of 7 MiB over highlat: $out"
fi
# the test data compresses about 2.5x
SIZE=$((6 << 20))
if out=$(x branch timeout -k 2 90 python3 "$PXTOOL" put 127.0.0.1 9080 31 $SIZE --timeout=80); then
	ok "upload of $SIZE bytes over highlat: $out"
else
	fail "upload of $SIZE bytes over highlat: $out"
fi
downs=$(grep -c "tunnel down" "$T/edge.log" || true)
[ "$downs" = 0 ] && ok "the tunnel stayed up" || fail "the tunnel went down $downs times: $(grep 'tunnel down' "$T/edge.log" | head -3)"

# a frozen core under a saturating upload
x branch timeout -k 2 40 python3 "$PXTOOL" put 127.0.0.1 9080 41 $((40 << 20)) --timeout=30 >/dev/null 2>&1 &
PUT=$!
sleep 4
if [ "$(cat /proc/"${PID[core]}"/comm 2>/dev/null)" != wanopt ]; then
	fail "core pid ${PID[core]} is not wanopt"
else
	kill -STOP "${PID[core]}"
	t0=$(date +%s%N)
	for _ in $(seq 100); do grep -q "tunnel down" "$T/edge.log" && break; sleep 0.1; done
	ms=$((($(date +%s%N) - t0) / 1000000))
	why=$(grep "tunnel down" "$T/edge.log" | head -1 | sed 's/.*tunnel down: //')
	[ -n "$why" ] && [ $ms -le 4000 ] && ok "frozen core noticed in $ms ms: $why" ||
		fail "frozen core: not noticed in $ms ms ($why)"
	kill -CONT "${PID[core]}"
fi
wait $PUT 2>/dev/null || true # reset by the tunnel's loss
px_wait_count edge "tunnel up" 2 15 && ok "the tunnel came back" || fail "no tunnel after the core resumed"
px_done
