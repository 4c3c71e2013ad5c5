#!/usr/bin/env bash
# proxy_diskfull.test.sh: the edge's store on a file system that other data
# fills up.
#
#   client --> edge 127.0.0.1:L ==TLS==> core 127.0.0.1:P --> server 127.0.0.1:SRV
#                |
#                store (store_size 64M) on a 96 MiB tmpfs of the test's, with
#                70 MiB of "logs" written to it mid-way
#
# 1. Every transfer, both ways, is byte-exact while the disk is full.
# 2. The edge keeps its store to what the file system leaves it (logged,
#    and in its stats), leaving the file system a reserve free; a write that
#    finds the disk full makes room and is written again, so that what
#    it stores after the disk filled is kept: fetching the last 32 MiB again
#    costs a few KB of WAN and no asks.  (Before, its writes kept failing
#    until its own count reached store_size: 700-870 KB and 4 asks.)
#    Restarted while the disk is full, the edge comes up, keeps to its room
#    from the start, and still holds what it stored.
# 3. Once the logs are deleted, the store grows back to its size.
# The store measures its file system once a second while idle too: it gives
# the disk its reserve back as soon as the logs fill it, and sees the room
# back as soon as they are deleted, both before any transfer.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a tmpfs of the test's)"; exit 0; }
px_setup
P=$(px_port) S1=$(px_port) S2=$(px_port) L=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
MB=$((1 << 20))
px_tmpfs "$T/disk" 96m
mkdir "$T/disk/store"
ln -s "$T/disk/store" "$T/edge.store"
px_core core "$P" "$S1" --allow=127.0.0.0/8
px_edge edge "$P" "$S2" "--forward=127.0.0.1:$L -> 127.0.0.1:$SRV" --store_size=64M
stat_() { px_stat "$S2" "$1"; }
free_kb() { df -k --output=avail "$T/disk" | tail -n 1 | tr -d ' '; }

for s in 1 2 3; do expect "download $s, 16 MiB" pxt get 127.0.0.1 "$L" $s $((16 * MB)); done
dd if=/dev/zero of="$T/disk/logs" bs=1M count=70 2>/dev/null || true
echo "     the disk now: $(free_kb) KiB free"
# idle, the store sees the disk full within seconds (it measures once a
# second) and gives the file system its reserve back
kb=0
for _ in $(seq 50); do kb=$(free_kb); [ "$kb" -ge 1024 ] && break; sleep 0.1; done
[ "$kb" -ge 1024 ] && ok "idle, the store gave the full disk back $kb KiB" ||
	fail "idle, the store left the disk full: $kb KiB free"

# ---- 1. transfers while the disk is full ----
for s in 4 5 6; do expect "download $s, 16 MiB, disk full" pxt get 127.0.0.1 "$L" $s $((16 * MB)); done

# ---- 2. the store keeps to the room it has ----
px_wait_count edge "its file system leaves it" 1 5 && ok "the edge logged it: $(grep -F "its file system leaves it" "$T/edge.log" | head -n 1 | cut -c26-)" ||
	fail "no log line about the store's room"
room=$(px_stat_wait "$S2" "j['store']['room_bytes'] > 0" True)
[ "$room" = True ] && ok "stats: store room $(stat_ "j['store']['room_bytes']") bytes of $(stat_ "j['store']['size_bytes']")" ||
	fail "stats: no store room: $(stat_ "j['store']")"
line=$("$BIN" stats --stats=127.0.0.1:"$S2" | grep -F "store kept to" || true)
[ -n "$line" ] && ok "wanopt stats: $line" || fail "wanopt stats has no 'store kept to' line"
kb=$(free_kb)
[ "$kb" -ge 512 ] && ok "the store leaves its file system $kb KiB free" || fail "the file system has $kb KiB free"
sleep 1.2 # the gauges
w0=$(stat_ "j['total']['wan_in']") a0=$(stat_ "j['total']['asks']")
expect "download 5 again" pxt get 127.0.0.1 "$L" 5 $((16 * MB))
expect "download 6 again" pxt get 127.0.0.1 "$L" 6 $((16 * MB))
sleep 1.2
w=$(($(stat_ "j['total']['wan_in']") - w0)) a=$(($(stat_ "j['total']['asks']") - a0))
[ "$w" -lt 65536 ] && [ "$a" = 0 ] && ok "the last 32 MiB again: $w WAN bytes, $a asks" ||
	fail "the last 32 MiB again: $w WAN bytes, $a asks (the store lost what it stored after the disk filled)"
for s in 11 12; do expect "upload $s, 8 MiB, disk full" pxt put 127.0.0.1 "$L" $s $((8 * MB)); done
sleep 1.2 # the store's errors are logged once a second
# a write that finds the disk full (it filled while the store was idle)
# makes room and is written again, not lost
if grep -F "read/write errors" "$T/edge.log" >/dev/null; then
	fail "the edge lost writes to the full disk: $(grep -F "read/write errors" "$T/edge.log" | head -n 1 | cut -c26-)"
else
	ok "no write lost to the full disk"
fi

# ---- 2b. restarted while the disk is full ----
px_stop edge
[ "$PX_STATUS" = 0 ] && ok "the edge stopped cleanly on the full disk" || fail "the edge exited with $PX_STATUS"
dd if=/dev/zero of="$T/disk/logs2" bs=64k 2>/dev/null || true
echo "     the disk now: $(free_kb) KiB free"
lost=$(px_count_log edge "read/write errors")
px_edge edge "$P" "$S2" "--forward=127.0.0.1:$L -> 127.0.0.1:$SRV" --store_size=64M &&
	ok "the edge restarted on the full disk" || fail "the edge did not restart: $(tail -n 3 "$T/edge.log")"
# the store measures its room as it opens, not at its first writes
room=$(px_stat_wait "$S2" "j['store']['room_bytes'] > 0" True)
[ "$room" = True ] && ok "stats, before any transfer: store room $(stat_ "j['store']['room_bytes']") bytes" ||
	fail "stats, before any transfer: no store room: $(stat_ "j['store']")"
w0=$(stat_ "j['total']['wan_in']")
expect "download 6 again, after the restart" pxt get 127.0.0.1 "$L" 6 $((16 * MB))
sleep 1.2
w=$(($(stat_ "j['total']['wan_in']") - w0))
[ "$w" -lt 65536 ] && ok "download 6 again after the restart: $w WAN bytes" ||
	fail "download 6 again after the restart: $w WAN bytes (the store lost it)"
expect "download 9, 16 MiB, after the restart" pxt get 127.0.0.1 "$L" 9 $((16 * MB))
sleep 1.2
[ "$(px_count_log edge "read/write errors")" = "$lost" ] && ok "no write lost after the restart" ||
	fail "writes lost after the restart: $(grep -F "read/write errors" "$T/edge.log" | tail -n 1 | cut -c26-)"
rm -f "$T/disk/logs2"

# ---- 3. space freed ----
# idle, the store sees the room back within seconds; what it stores from
# then on it keeps, until it holds its size again
rm -f "$T/disk/logs"
px_wait_count edge "has room for its 64.0 MiB again" 1 5 && ok "idle, the edge logged the room back" ||
	fail "no log line about the room back"
[ "$(px_stat_wait "$S2" "j['store']['room_bytes']" 0)" = 0 ] && ok "stats: room 0 (the store's size)" ||
	fail "stats: room $(stat_ "j['store']['room_bytes']")"
expect "download 7, 16 MiB, space freed" pxt get 127.0.0.1 "$L" 7 $((16 * MB))
expect "download 8, 16 MiB, the room back" pxt get 127.0.0.1 "$L" 8 $((16 * MB))
sleep 1.2 # the gauges
fill=$(stat_ "j['store']['fill_bytes']")
[ "$fill" -gt $((56 * MB)) ] && ok "the store grew back: $fill bytes" || fail "the store holds $fill bytes"
px_alive edge && ok "the edge is up" || fail "the edge died"
px_done
