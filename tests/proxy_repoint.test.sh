#!/usr/bin/env bash
# proxy_repoint.test.sh: a reload that names another core (`peer`) moves the
# edge's tunnel to it without cutting a stream (proxy/edge_peer.c).
#
#   client --> edge (-c edge.conf) ==TLS==> core1 127.0.0.1:P1 --> server
#                                  ==TLS==> core2 127.0.0.1:P2 --> server
#
# 1. With a slow download running through core1 and clients opening
#    connections in a loop, a reload points the edge at core2: it dials
#    core2 and keeps its connection to core1 until that is up, so no
#    connection is refused; the download finishes byte-exact through core1,
#    whose connection then closes; new transfers go through core2.
# 2. A reload naming a core that does not answer: the edge keeps its
#    connection to core2 (transfers go on) while it dials the new address.
# 3. A reload back to core2: a new connection to it, transfers go on.
# Before: 'peer' took effect after a restart (a drain of every stream).
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup
P1=$(px_port) P2=$(px_port) P3=$(px_port) S1=$(px_port) S2=$(px_port) SE=$(px_port) L=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
MB=$((1 << 20))
conf() { # the edge's configuration, with peer port $1
	printf 'peer = 127.0.0.1:%s\nstore = %s\ntls_cert = %s\ntls_key = %s\ntls_ca = %s\nstats = 127.0.0.1:%s\nforward = 127.0.0.1:%s -> 127.0.0.1:%s\n' \
		"$1" "$T/edge.store" "$T/pki/edge.crt" "$T/pki/edge.key" "$T/pki/ca.crt" "$SE" "$L" "$SRV" >"$T/edge.conf"
}
reload() { # peer port
	conf "$1"
	kill -HUP "${PID[edge]}"
}
opens() { px_count_log "$1" "open 127.0.0.1"; }
px_core core1 "$P1" "$S1" --allow=127.0.0.0/8
px_core core2 "$P2" "$S2" --allow=127.0.0.0/8
conf "$P1"
px_run edge edge -c "$T/edge.conf"
px_wait_count edge "tunnel up" 1 15 || fail "the edge did not connect to core1"
expect "a download through core1" pxt get 127.0.0.1 "$L" 1 $((4 * MB))

# ---- 1. to core2, under traffic ----
px_bg slow slowget 127.0.0.1 "$L" 2 $((12 * MB)) $((2 * MB)) --progress="$T/slow.p" --timeout=60
px_wait_file "$T/slow.p" || true
px_bg churn churn 127.0.0.1 "$L" 2 4 --timeout=20
sleep 1
reload "$P2"
px_wait_log edge "the core is now 127.0.0.1:$P2" 10 &&
	ok "reloaded: $(grep -F "the core is now" "$T/edge.log" | cut -c26- | cut -c1-110)..." || fail "the edge did not move"
px_wait_count core2 "tunnel up" 1 10 && ok "core2: tunnel up" || fail "the edge did not connect to core2"
px_bg_wait churn 30
[ "$BG_RC" = 0 ] && ok "connections opened during the move, none refused: $BG_OUT" || fail "churn: $BG_RC $BG_OUT"
px_alive slow && ok "the slow download still runs (through core1)" || fail "the slow download ended early"
px_bg_wait slow 60
[ "$BG_RC" = 0 ] && ok "the slow download across the move: $BG_OUT" || fail "the slow download: $BG_RC $BG_OUT"
px_wait_log core1 "tunnel down" 10 && ok "core1's connection closed after it: $(grep -F "tunnel down" "$T/core1.log" | tail -n 1 | cut -c26-)" ||
	fail "core1's connection stayed"
o2=$(opens core2)
expect "a download after the move" pxt get 127.0.0.1 "$L" 3 $((4 * MB))
[ "$(opens core2)" -gt "$o2" ] && ok "it went through core2" || fail "it did not go through core2"

# ---- 2. a core that does not answer ----
reload "$P3"
px_wait_log edge "the core is now 127.0.0.1:$P3" 10 || fail "the edge did not take the reload"
px_wait_log edge "127.0.0.1:$P3" 10 >/dev/null || true
sleep 1
o2=$(opens core2)
expect "a download while the new core does not answer" pxt get 127.0.0.1 "$L" 4 $((4 * MB))
[ "$(opens core2)" -gt "$o2" ] && ok "it went through core2, still up" || fail "it did not go through core2"
grep -F "tunnel to 127.0.0.1:$P3" "$T/edge.log" | grep -q "refused\|Connection refused" &&
	ok "the dials to it: $(grep -F "tunnel to 127.0.0.1:$P3" "$T/edge.log" | tail -n 1 | cut -c26-)" ||
	fail "no failed dial to 127.0.0.1:$P3 logged"

# ---- 3. back to core2 ----
ups=$(px_count_log core2 "tunnel up")
reload "$P2"
px_wait_count core2 "tunnel up" $((ups + 1)) 10 && ok "back to core2: a new connection" || fail "no new connection to core2"
expect "a download after that" pxt get 127.0.0.1 "$L" 5 $((4 * MB))
[ "$(px_resets edge core1 core2)" = 0 ] && ok "no stream reset" || fail "resets: $(grep -h reset "$T/edge.log" | head -3)"
px_done
