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
# 3. A reload naming another store: the edge goes over to it with a slow
#    download running on the first; a reload back while that still runs
#    goes back to the first at once (still open), and the second is closed;
#    a store that cannot be used is said so, and the edge stays on its own;
#    a store path that is a file fails the reload.  Before, a changed store
#    took effect after a restart.
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
px_tmpfs "$T/edisk" 256m
px_tmpfs "$T/cdisk" 256m
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

px_core core "$P" "$S1" --allow=127.0.0.0/8 --store_size=128M
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
px_core core "$P" "$S1" --allow=127.0.0.0/8 --store_size=128M
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

# ---- 3. reloads naming another store ----
conf() { # the edge's configuration, with store $1
	printf 'peer = 127.0.0.1:%s\nstore = %s\nstore_size = 64M\ntls_cert = %s\ntls_key = %s\ntls_ca = %s\nstats = 127.0.0.1:%s\nforward = 127.0.0.1:%s -> 127.0.0.1:%s\n' \
		"$P" "$1" "$T/pki/edge.crt" "$T/pki/edge.key" "$T/pki/ca.crt" "$S2" "$L" "$SRV" >"$T/edge.conf"
}
reload() { # store, then the log line to wait for
	local n
	n=$(px_count_log edge "$2")
	conf "$1"
	kill -HUP "${PID[edge]}"
	px_wait_count edge "$2" $((n + 1)) 10
}
conf "$T/edge.store"
px_stop edge
px_run edge edge -c "$T/edge.conf"
px_wait_count edge "tunnel up" $(($(px_count_log edge "tunnel up") + 1)) 15 || fail "the edge did not start from its file"
up=$(px_count_log core "tunnel up")
expect "download 10 on the first store" pxt get 127.0.0.1 "$L" 10 $((4 * MB))
px_bg slow slowget 127.0.0.1 "$L" 9 $((20 * MB)) $((2 * MB)) --progress="$T/slow3.p" --timeout=60
px_wait_file "$T/slow3.p" || true
reload "$T/edisk/store2" "in place of $T/edge.store" && ok "reload to store2: $(grep -F "in place of" "$T/edge.log" | tail -n 1 | cut -c26- | cut -c1-120)..." ||
	fail "reload to store2: not gone over"
px_wait_count core "tunnel up" $((up + 1)) 10 || true
two=$(core_saw)
[ "$two" != "$own" ] && ok "the core sees store2's id ($two)" || fail "the core's last tunnel up names $two"
reload "$T/edge.store" "in place of $T/edisk/store2" && ok "reload back to the first store while a stream runs on it: at once" ||
	fail "reload back: not gone over"
px_wait_count core "tunnel up" $((up + 2)) 10 || true
[ "$(core_saw)" = "$own" ] && ok "the core sees the first store's id again ($own)" || fail "the core's last tunnel up names $(core_saw)"
px_wait_log edge "store2: closed (the last stream on it ended)" 5 && ok "store2 closed" || fail "store2 not closed"
px_bg_wait slow 60
[ "$BG_RC" = 0 ] && ok "the slow download across both reloads: $BG_OUT" || fail "the slow download: $BG_RC $BG_OUT"
hot "download 10 on the first store again" 10 $((4 * MB))
[ "$(px_count_log edge "edge.store: closed")" = 0 ] && ok "the first store was never closed" || fail "the first store was closed"
px_tmpfs "$T/rodisk" 4m
mount -o remount,ro "$T/rodisk"
reload "$T/rodisk/s" "cannot be used yet" && ok "a store on a read-only disk: $(grep -F "cannot be used yet" "$T/edge.log" | tail -n 1 | cut -c26-)" ||
	fail "a store on a read-only disk: not said"
expect "download 7 meanwhile" pxt get 127.0.0.1 "$L" 7 $((8 * MB))
[ "$(core_saw)" = "$own" ] && ok "still on the first store" || fail "the core's last tunnel up names $(core_saw)"
reload "$T/edge.store" "the node stays on it" && ok "a reload back to it: the edge stays" || fail "a reload back: not said"
: >"$T/afile"
reload "$T/afile" "keeping the running configuration" &&
	ok "a store path that is a file: $(grep -F "keeping the running configuration" "$T/edge.log" | tail -n 1 | cut -c26-)" ||
	fail "a store path that is a file: the reload was not refused"
[ "$(px_resets edge core)" = 0 ] && ok "no stream reset" || fail "resets: $(grep -h reset "$T/edge.log" "$T/core.log" | head -3)"
px_done
