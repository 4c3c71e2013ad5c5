#!/usr/bin/env bash
# proxy_pace.test.sh: the tunnel connections to one peer share one pacing cap.
#
#   clients --> edge (link_rate = 40M, tunnels = 2) ==two TLS connections==> core (no hints) --> server
#
# Each side paces what it sends to the other at 95 % of the link's rate:
# 38 Mbit/s.  With two tunnel connections, that cap is shared between them.
# 1. Two downloads at once (streams go to the least loaded connection, so
#    one each): the core's two sockets to the edge are each capped near half
#    of 38 Mbit/s, together at most 38, and together they deliver at most
#    that (bytes acknowledged, from ss, over 2 s).  Paced each on its own, as
#    before, they were capped at 38 each and moved 59-60 Mbit/s together.
# 2. One download alone: its connection gets the whole cap back.
# 3. Two uploads at once: the edge's two sockets share the cap the same way.
# 4. `wanopt stats` shows the caps: the edge's two connections to the core
#    are one peer, paced at 38 Mbit/s in all.
# 5. Every transfer is exact.
# All on the loopback of a network namespace of the test's own, its MTU set
# to Ethernet's: with loopback's 64 KiB packets, the kernel's pacing lets
# through about 20 % more than the cap.
set -eu
cd "$(dirname "$0")/.."
if [ -z "${PACE_NS:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 0; }
	NS=wpace-$$
	ip netns add "$NS"
	trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
	ip -n "$NS" link set lo mtu 1500 up
	rc=0
	PACE_NS=$NS timeout -k 5 150 ip netns exec "$NS" bash "$0" || rc=$?
	exit $rc
fi
. tests/proxy/lib.sh
px_setup

P=$(px_port) S1=$(px_port) S2=$(px_port) L=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
px_core core "$P" "$S1" --allow=127.0.0.0/8
px_edge edge "$P" "$S2" "--forward=127.0.0.1:$L -> 127.0.0.1:$SRV" --link_rate=40M --tunnels=2
px_wait_count edge "tunnel up" 2 10
CAP=38000000
MB=$((1 << 20))

# The tunnel sockets matching an ss filter, one line each: "CAP ACKED"
# (pacing cap in bit/s, 0 for none; bytes acknowledged).
sockets() {  # ss-filter
	python3 tests/proxy/ss_pace.py "$1"
}
# Two samples of FILTER's sockets 2 s apart, while transfers run: checks
# that the caps are shared and that the bytes delivered fit in them.
check_shared() {  # what ss-filter
	local r caps rate
	r=$(python3 tests/proxy/ss_pace.py "$2" 2)
	caps=$(echo "$r" | sed -n 1p) rate=$(echo "$r" | sed -n 2p)
	python3 -c "
c = [int(x) for x in '$caps'.split()]
assert len(c) == 2 and all($CAP / 4 <= x <= $CAP * 0.6 for x in c) and sum(c) <= $CAP * 1.02, c" 2>/dev/null &&
		ok "$1: caps $caps bit/s (95 % of 40 Mbit/s shared)" || fail "$1: caps $caps bit/s, want two near $((CAP / 2)) summing to at most $CAP"
	[ "$rate" -ge 0 ] && [ "$rate" -le $((CAP * 11 / 10)) ] && ok "$1: together $rate bit/s over 2 s" ||
		fail "$1: together $rate bit/s over 2 s, more than the cap $CAP"
}

# ---- 1. two downloads: the core's sockets ----
px_bg d1 get 127.0.0.1 "$L" 101 $((24 * MB))
px_bg d2 get 127.0.0.1 "$L" 102 $((24 * MB))
sleep 1.5 # a tick or two to share, and both streams busy
check_shared "core -> edge, two downloads" "( sport = :$P )"
for n in d1 d2; do
	px_bg_wait $n 60
	[ $BG_RC = 0 ] && ok "download $n exact in $BG_SECS s: $BG_OUT" || fail "download $n: rc $BG_RC $BG_OUT"
done

# ---- 2. one download alone: the whole cap ----
px_bg d3 get 127.0.0.1 "$L" 103 $((24 * MB))
for _ in $(seq 30); do
	sleep 0.1
	caps=$(sockets "( sport = :$P )" | awk '{ print $1 }' | sort -n | tr '\n' ' ')
	top=$(echo $caps | awk '{ print $2 }')
	[ "${top:-0}" -ge $((CAP * 95 / 100)) ] && break
done
[ "${top:-0}" -ge $((CAP * 95 / 100)) ] && ok "one download alone: caps $caps bit/s (the busy one takes the whole cap)" ||
	fail "one download alone: caps $caps bit/s, want one at $CAP"
px_bg_wait d3 60
[ $BG_RC = 0 ] && ok "download alone exact in $BG_SECS s" || fail "download alone: rc $BG_RC $BG_OUT"

# ---- 3. two uploads: the edge's sockets ----
px_bg u1 put 127.0.0.1 "$L" 201 $((24 * MB))
px_bg u2 put 127.0.0.1 "$L" 202 $((24 * MB))
sleep 1.5
check_shared "edge -> core, two uploads" "( dport = :$P )"
# the edge's stats: its two connections to the core are one peer, paced at
# the sum of their caps: the cap, or within 2 % of it, as check_shared
# allows (each connection takes its share at its own tick, from the other's
# last rate, so for a tick the two may add up to a little more or less)
near_cap() {  # bit/s
	python3 -c "import sys; sys.exit(not $CAP * 0.98 <= float('$1') <= $CAP * 1.02)" 2>/dev/null
}
for _ in $(seq 20); do
	pace=$(px_stat "$S2" '[p["pace_bps"] for p in j["tunnel"]["peers"]]')
	[ "$pace" = "[$CAP]" ] && break
	sleep 0.1
done
case $pace in \[*[0-9]\]) near_cap "${pace//[][]/}" ;; *) false ;; esac &&
	ok "edge stats: the core paced at $pace bit/s in all" || fail "edge stats: pace_bps $pace, want [$CAP] (within 2 %)"
line=$(timeout 10 "$BIN" stats --stats=127.0.0.1:"$S2" | grep "tunnel peers")
mbit=$(echo "$line" | sed -n 's/.*sending at 40 Mbit\/s (paced at \([0-9.]*\)).*/\1/p')
[ -n "$mbit" ] && near_cap "${mbit}e6" && ok "wanopt stats: $line" || fail "wanopt stats: '$line'"
for n in u1 u2; do
	px_bg_wait $n 60
	[ $BG_RC = 0 ] && ok "upload $n exact in $BG_SECS s: $BG_OUT" || fail "upload $n: rc $BG_RC $BG_OUT"
done
px_done
