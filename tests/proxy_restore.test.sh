#!/usr/bin/env bash
# proxy_restore.test.sh: a node on a volatile store (its own could not be
# opened at start) goes back to its own store once that opens again, with
# no restart and no stream cut (proxy/node_swap.c).
#
#   client --> edge 127.0.0.1:L ==TLS==> core 127.0.0.1:P --> server 127.0.0.1:SRV
#   each node's store on a tmpfs of the test's, remounted read-only (as a
#   file system is after errors) and then read-write again
#
# 1. The edge: started with its store's disk read-only, on a volatile store,
#    with a slow download and an interactive stream running.  Once the disk
#    takes writes, the edge opens its store and goes over to it: its stats
#    say so, its new tunnel connection carries the store's id (the core logs
#    it), the running streams finish byte-exact on the volatile store, which
#    is then closed and removed.  Data the store held before is hot at once;
#    data learned after the switch is in the store after a restart.
#    Connections opened all through the switch are taken (the edge dials
#    its new tunnel connection before it lets the old one go).
# 2. The core: the same, seen from the edge: the core asks it to renew its
#    connection (GOAWAY, code RENEW), the edge dials again and moves over
#    once that is up: no connection refused meanwhile, the slow download
#    finishes, and what the core's store held is hot again.
# Before: the node logged that the store could be used and stayed on the
# volatile store until restarted.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (tmpfs mounts of the test's)"; exit 0; }
px_setup
P=$(px_port) S1=$(px_port) S2=$(px_port) L=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
MB=$((1 << 20))
px_tmpfs "$T/edisk" 96m
px_tmpfs "$T/cdisk" 96m
px_tmpfs "$T/shm" 128m
export WANOPT_VOLATILE_DIR="$T/shm"
mkdir "$T/edisk/store" "$T/cdisk/store"
ln -s "$T/edisk/store" "$T/edge.store"
ln -s "$T/cdisk/store" "$T/core.store"
vols() { find "$T/shm" -maxdepth 1 -name 'wanopt-volatile-*' | wc -l; }
fwd="--forward=127.0.0.1:$L -> 127.0.0.1:$SRV"
# the store id the core's last "tunnel up" line names
core_saw() { grep -F "tunnel up" "$T/core.log" | tail -n 1 | sed -n 's/.*store \([0-9a-f]*\)).*/\1/p'; }
wan() { sleep 1.2; px_stat "$S2" "j['total']['wan_in']"; } # the gauges are published once a second
# hot NAME SEED SIZE: a download that must cross at most 64 KiB of WAN
hot() {
	local w0 w1
	w0=$(wan)
	expect "$1" pxt get 127.0.0.1 "$L" "$2" "$3"
	w1=$(wan)
	[ $((w1 - w0)) -lt 65536 ] && ok "$1: hot, $((w1 - w0)) WAN bytes" || fail "$1: $((w1 - w0)) WAN bytes"
}

px_core core "$P" "$S1" --allow=127.0.0.0/8
px_edge edge "$P" "$S2" "$fwd" --store_size=64M
own=$(core_saw)
expect "download 1 on the edge's own store" pxt get 127.0.0.1 "$L" 1 $((16 * MB))
px_stop edge

# ---- 1. the edge ----
mount -o remount,ro "$T/edisk"
px_edge edge "$P" "$S2" "$fwd" --store_size=64M
[ "$(px_stat "$S2" "j['store']['volatile']")" = 1 ] && ok "the edge runs on a volatile store" ||
	fail "stats: $(px_stat "$S2" "j['store']")"
vol=$(core_saw)
[ -n "$own" ] && [ "$vol" != "$own" ] && ok "the core sees the volatile store's id ($vol, not $own)" ||
	fail "store ids: own '$own', volatile '$vol'"
px_bg slow slowget 127.0.0.1 "$L" 5 $((20 * MB)) $((2 * MB)) --progress="$T/slow.p" --timeout=60
px_bg live live 127.0.0.1 "$L" 14 --ready="$T/live.p" --timeout=60
px_wait_file "$T/slow.p" || true
px_wait_file "$T/live.p" || true
px_bg churn churn 127.0.0.1 "$L" 2 10 --timeout=20 # new connections all through the switch
mount -o remount,rw "$T/edisk"
px_wait_log edge "opened again" 15 &&
	ok "the disk back: $(grep -F "opened again" "$T/edge.log" | cut -c26- | cut -c1-150)..." ||
	fail "the edge did not go over to its store"
[ "$(px_stat_wait "$S2" "j['store']['volatile']" 0)" = 0 ] && ok "stats: store.volatile 0" ||
	fail "stats: $(px_stat "$S2" "j['store']")"
"$BIN" stats --stats=127.0.0.1:"$S2" | grep -q "store VOLATILE" && fail "wanopt stats still says VOLATILE" ||
	ok "wanopt stats no longer says VOLATILE"
px_wait_count core "tunnel up" 3 10 || true
[ "$(core_saw)" = "$own" ] && ok "the edge's new tunnel connection carries its store's id ($own)" ||
	fail "the core's last tunnel up names store '$(core_saw)', not '$own'"
[ "$(vols)" = 1 ] && px_alive slow && ok "the volatile store stays while the slow download runs on it" ||
	fail "$(vols) volatile stores; slow download alive: $(px_alive slow && echo yes || echo no)"
px_bg_wait slow 60
[ "$BG_RC" = 0 ] && ok "the slow download across the switch: $BG_OUT" || fail "the slow download: $BG_RC $BG_OUT"
px_bg_wait live 60
[ "$BG_RC" = 0 ] && ok "the interactive stream across the switch: $BG_OUT" || fail "the interactive stream: $BG_RC $BG_OUT"
px_bg_wait churn 40
[ "$BG_RC" = 0 ] && ok "connections opened during the switch, none refused: $BG_OUT" || fail "churn: $BG_RC $BG_OUT"
px_wait_log edge "closed and removed" 5 && [ "$(vols)" = 0 ] &&
	ok "then: $(grep -F "closed and removed" "$T/edge.log" | cut -c26-)" || fail "$(vols) volatile stores left"
hot "download 1, held by the edge's store before" 1 $((16 * MB))
expect "download 7, new" pxt get 127.0.0.1 "$L" 7 $((8 * MB))
px_stop edge
px_edge edge "$P" "$S2" "$fwd" --store_size=64M
[ "$(px_stat "$S2" "j['store']['volatile']")" = 0 ] && ok "restarted on its own store" || fail "restarted: volatile"
hot "download 7 after a restart: stored after the switch" 7 $((8 * MB))

# ---- 2. the core ----
up0=$(px_count_log edge "tunnel up")
px_stop core
mount -o remount,ro "$T/cdisk"
px_core core "$P" "$S1" --allow=127.0.0.0/8
px_wait_log core "running on a volatile store" 5 || fail "the core is not on a volatile store"
up0=$((up0 + 1))
px_wait_count edge "tunnel up" "$up0" 15 || fail "the edge did not connect again"
px_bg slow slowget 127.0.0.1 "$L" 6 $((20 * MB)) $((2 * MB)) --progress="$T/slow2.p" --timeout=60
px_wait_file "$T/slow2.p" || true
px_bg churn churn 127.0.0.1 "$L" 2 10 --timeout=20
mount -o remount,rw "$T/cdisk"
px_wait_log core "opened again" 15 && ok "the core went over to its store" || fail "the core stayed volatile"
[ "$(px_stat_wait "$S1" "j['store']['volatile']" 0)" = 0 ] && ok "core stats: store.volatile 0" ||
	fail "core stats: $(px_stat "$S1" "j['store']")"
px_wait_count edge "tunnel up" $((up0 + 1)) 10 && ok "the edge dialed again after the core's GOAWAY" ||
	fail "the edge did not dial again"
px_bg_wait slow 60
[ "$BG_RC" = 0 ] && ok "the slow download across the core's switch: $BG_OUT" || fail "the slow download: $BG_RC $BG_OUT"
px_bg_wait churn 40
[ "$BG_RC" = 0 ] && ok "connections opened during the core's switch, none refused (the edge dials first): $BG_OUT" ||
	fail "churn: $BG_RC $BG_OUT"
px_wait_log core "closed and removed" 5 && [ "$(vols)" = 0 ] && ok "the core's volatile store removed" ||
	fail "$(vols) volatile stores left"
hot "download 1, held by both stores" 1 $((16 * MB))
expect "upload 8" pxt put 127.0.0.1 "$L" 8 $((4 * MB))
[ "$(px_resets edge core)" = 0 ] && ok "no stream reset" || fail "resets: $(grep -h reset "$T/edge.log" "$T/core.log" | head -3)"
px_done
