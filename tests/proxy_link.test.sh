#!/usr/bin/env bash
# proxy_link.test.sh: each side's WAN link (link_rate, link_rtt), told to the
# other in the tunnel HELLO, so that one core serves branches on different links.
#
#   client --> edge a (link_rate = 20M/1.544M, link_rtt = 40ms) ==TLS==> core (no hints) --> server
#   client --> edge b (no hints)                                ==TLS==> core
#   client --> edge c (link_rate = 20M, link_rtt = 300ms)       ==TLS==> core2 (link_rate = 10M)
#
# 1. Pacing: the core paces its connection to edge a at 95 % of a's download
#    rate (19 Mbit/s) and sizes its buffers for a's round trip; edge a paces at
#    95 % of its upload rate (1.4668 Mbit/s); edge b's connection is not paced.
#    Each side takes the slower of its own rate and the peer's: core2 and edge
#    c pace at 9.5 Mbit/s both ways, and core2 grants each stream edge c opens
#    4 x 10 Mbit/s x 300 ms of credit (1.5 MB, above the 1 MiB of its HELLO).
# 2. Streams take their residual coder from their connection's link: the core
#    compresses downloads to edge a with zstd 9 (20 Mbit/s), to edge b with
#    zstd 3 (unknown); edge a compresses uploads with zstd 16 (1.544 Mbit/s).
# 3. Transfers through each stay exact both ways.
# 4. SIGHUP with new hints at edge a (50M/2M): the same tunnel connection, now
#    paced at 1.9 Mbit/s by edge a and, told by a LINK frame, at 47.5 Mbit/s by
#    the core, whose new streams to a take zstd 3; a download running across
#    the reload stays exact.  SIGHUP with link_rate = 5M at core2 (its workers'
#    threads): both ends of edge c's connection pace at 4.75 Mbit/s.
# 5. (before 4) An upload through edge a (zstd 16) next to an echo session on
#    another stream, exact: edge a codes the upload on its coder thread, not
#    on the event loop (16 KiB at level 16 would hold the loop, and the echo,
#    for about 16 ms), as the core codes downloads to edge a (zstd 9, 20
#    Mbit/s); edge b (no hints) codes its upload on the loop (zstd 3).
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup

P=$(px_port) P2=$(px_port) S1=$(px_port) S2=$(px_port) S3=$(px_port) S4=$(px_port) S5=$(px_port)
LA=$(px_port) LB=$(px_port) LC=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
px_core core "$P" "$S1" --allow=127.0.0.0/8 --log_level=debug
printf 'link_rate = 10M\n' >"$T/core2.conf"
px_core core2 "$P2" "$S4" --allow=127.0.0.0/8 --config="$T/core2.conf"
printf 'link_rate = 20M/1.544M\nlink_rtt = 40ms\nlog_level = debug\n' >"$T/a.conf"
px_edge a "$P" "$S2" "--forward=127.0.0.1:$LA -> 127.0.0.1:$SRV" --config="$T/a.conf"
px_edge b "$P" "$S3" "--forward=127.0.0.1:$LB -> 127.0.0.1:$SRV" --log_level=debug
px_edge c "$P2" "$S5" "--forward=127.0.0.1:$LC -> 127.0.0.1:$SRV" --link_rate=20M --link_rtt=300ms

# The local port of NAME's tunnel connection to tunnel port PORT.
edge_port() {  # name port
	local addr
	addr=$(ss -tnpH state established "( dport = :$2 )" | grep "pid=${PID[$1]}," | awk '{print $3}' | head -1)
	echo "${addr##*:}"
}
# The pacing cap of the socket matching an ss filter, in bit/s ("none" when
# the socket has none).
pacing_cap() {  # ss-filter
	local cap
	cap=$(python3 tests/proxy/ss_pace.py "$1" | head -1)
	cap=${cap%% *}
	[ -n "$cap" ] || { echo "no socket"; return; }
	[ "$cap" = 0 ] && echo none || echo "$cap"
}
# Polls up to 5 s: each side applies what the other's HELLO or LINK said
# when that arrives, which may be after this side saw its own tunnel up.
check_cap() {  # description ss-filter want
	local got i
	for i in $(seq 50); do
		got=$(pacing_cap "$2")
		[ "$got" = "$3" ] && break
		sleep 0.1
	done
	[ "$got" = "$3" ] && ok "$1: pacing cap $got" || fail "$1: pacing cap $got, want $3"
}

# ---- 1. pacing ----
pa=$(edge_port a "$P") pb=$(edge_port b "$P") pc=$(edge_port c "$P2")
check_cap "core -> edge a (a receives at 20M)" "( sport = :$P and dport = :$pa )" 19000000
check_cap "edge a -> core (a sends at 1.544M)" "( sport = :$pa and dport = :$P )" 1466800
check_cap "core -> edge b (no hints)" "( sport = :$P and dport = :$pb )" none
check_cap "core2 (10M) -> edge c (20M)" "( sport = :$P2 and dport = :$pc )" 9500000
check_cap "edge c (20M) -> core2 (10M)" "( sport = :$pc and dport = :$P2 )" 9500000
px_wait_log core "the peer receives at 20.000 Mbit/s and sends at 1.544 Mbit/s, round trip 40.0 ms" 5 &&
	ok "the core logged edge a's link" || fail "the core did not log edge a's link"
grep -q "the peer receives at" "$T/b.log" &&
	fail "edge b logged a link it was not told" || ok "edge b was told no link (the core has no hints)"
px_wait_log c "the peer receives at 10.000 Mbit/s" 5 && ok "edge c logged core2's link" ||
	fail "edge c did not log core2's link"
px_wait_log core2 "the peer receives at 20.000 Mbit/s and sends at 20.000 Mbit/s, round trip 300.0 ms;" 5 &&
	grep -q "round trip 300.0 ms;.*stream window 1500000 bytes" "$T/core2.log" &&
	ok "core2 grants edge c's streams a 1.5 MB window" ||
	fail "core2's window for edge c: $(grep -o 'stream window [0-9]* bytes' "$T/core2.log" | head -1)"
# the stats list each peer with the rate sent to it (published once a second)
links=$(px_stat_wait "$S1" 'sorted(p["link_bps"] for p in j["tunnel"]["peers"])' "[0, 20000000]")
[ "$links" = "[0, 20000000]" ] && ok "the core's stats: link_bps of its two peers $links" ||
	fail "the core's stats: link_bps of its peers $links, want [0, 20000000]"
bufs=$(grep -o "the peer receives at 20.000 Mbit/s.*buffers [0-9]* bytes" "$T/core.log" | grep -o '[0-9]* bytes' | head -1)
[ "$bufs" = "400000 bytes" ] && ok "the core sized edge a's buffers to 4 x 20 Mbit/s x 40 ms: $bufs" ||
	fail "edge a's buffers at the core: '$bufs', want 400000 bytes"

# ---- 2. residual coder per connection, 3. exact transfers ----
MB=$((1 << 20))
expect "download through edge a" pxt get 127.0.0.1 "$LA" 11 $MB
expect "upload through edge a" pxt put 127.0.0.1 "$LA" 12 $MB
expect "download through edge b" pxt get 127.0.0.1 "$LB" 13 $MB
expect "download through edge c" pxt get 127.0.0.1 "$LC" 14 $MB
expect "upload through edge c (the larger window)" pxt put 127.0.0.1 "$LC" 15 $((4 * MB))
# many streams at once on a link where both ends code on their coding threads
expect "30 transfers at once through edge c (get, put, echo)" pxt many 127.0.0.1 "$LC" 30 61 --sizes=0,100000,1000000
for want in "core (full, zstd 9)" "core (full, zstd 3)" "a (full, zstd 16)" "b (full, zstd 3)" \
	"core2 (full, zstd 9)" "c (full, zstd 9)"; do
	n=${want%% *} what=${want#* }
	px_wait_log "$n" "$what" 5 && ok "$n: a stream coded with $(echo "${what#(full, }" | tr -d ")")" ||
		fail "$n: no stream opened $what: $(grep -o 'open .*' "$T/$n.log" | head -3 | tr '\n' ';')"
done
# ---- 5. a slow link's bulk is coded off the event loop ----
px_bg bulk put 127.0.0.1 "$LA" 16 $((3 * MB))
sleep 1
expect "an echo session through edge a next to an upload" pxt live 127.0.0.1 "$LA" 3
px_bg_wait bulk 60
[ "$BG_RC" = 0 ] && ok "the upload next to the echo: $BG_OUT" || fail "the upload next to the echo: $BG_OUT"
grep -q "bulk coded on the coder thread (zstd 16)" "$T/a.log" &&
	ok "edge a coded the upload on its coder thread (zstd 16)" ||
	fail "edge a: no upload coded on the coder thread: $(grep -c "coder thread" "$T/a.log") lines"
grep -q "bulk coded on the coder thread (zstd 9)" "$T/core.log" &&
	ok "the core coded downloads to edge a on a coder thread (zstd 9)" ||
	fail "the core: no download to edge a coded on a coder thread"
expect "upload through edge b (no hints: zstd 3)" pxt put 127.0.0.1 "$LB" 19 $MB
grep -q "bulk coded on the coder thread" "$T/b.log" &&
	fail "edge b (no hints) coded an upload on a coder thread" ||
	ok "edge b (no hints) coded its upload on its event loop"
echo "     longest loop hold: edge a $(px_stat "$S2" 'j["loop_lag_max_us"]') us, core $(px_stat "$S1" 'j["loop_lag_max_us"]') us"
# ---- 4. reload ----
ups=$(px_count_log a "tunnel up")
zc=$(px_count_log core "(full, zstd 3)")
px_bg across get 127.0.0.1 "$LA" 21 $((8 * MB))
sleep 0.3
printf 'link_rate = 50M/2M\nlink_rtt = 40ms\n' >"$T/a.conf"
kill -HUP "${PID[a]}"
px_wait_log a "link hints now: sending at 2.000 Mbit/s, receiving at 50.000 Mbit/s" 5 &&
	ok "edge a applied the new hints on SIGHUP" || fail "edge a did not log its new hints"
px_wait_log core "the peer receives at 50.000 Mbit/s" 5 && ok "the core heard edge a's new link" ||
	fail "the core did not hear edge a's new link"
check_cap "after the reload: core -> edge a" "( sport = :$P and dport = :$pa )" 47500000
check_cap "after the reload: edge a -> core" "( sport = :$pa and dport = :$P )" 1900000
px_bg_wait across 60
[ "$BG_RC" = 0 ] && ok "a download across the reload: $BG_OUT" || fail "a download across the reload: $BG_OUT"
expect "download through edge a after the reload" pxt get 127.0.0.1 "$LA" 22 $MB
[ "$(px_count_log core "(full, zstd 3)")" -gt "$zc" ] && ok "the core's new stream to edge a took zstd 3 (50 Mbit/s)" ||
	fail "no new zstd 3 stream at the core after the reload"
printf 'link_rate = 5M\n' >"$T/core2.conf"
kill -HUP "${PID[core2]}"
px_wait_log c "the peer receives at 5.000 Mbit/s" 5 && ok "edge c heard core2's new link" ||
	fail "edge c did not hear core2's new link"
check_cap "after core2's reload: core2 -> edge c" "( sport = :$P2 and dport = :$pc )" 4750000
check_cap "after core2's reload: edge c -> core2" "( sport = :$pc and dport = :$P2 )" 4750000
[ "$(px_count_log a "tunnel up")" = "$ups" ] && [ "$(px_count_log a "tunnel down")" = 0 ] &&
	ok "the tunnel stayed up through the reload" || fail "the tunnel went down or reconnected on reload"
# hints taken away: the peer says so, and the pacing cap goes
: >"$T/core2.conf"
kill -HUP "${PID[core2]}"
px_wait_log c "the peer gives no link hints now" 5 && ok "edge c heard core2's hints go: $(grep -m1 "no link hints now" "$T/c.log" | cut -c26-)" ||
	fail "edge c did not log core2's hints going"
# an edge telling an enormous link: the core's buffers stop at 64 MiB
printf 'link_rate = 100G\nlink_rtt = 10s\n' >"$T/a.conf"
kill -HUP "${PID[a]}"
px_wait_log core "the peer receives at 100000.000 Mbit/s" 5 || true
bufs=$(grep -o "the peer receives at 100000.000 Mbit/s.*buffers [0-9]* bytes" "$T/core.log" | grep -o '[0-9]* bytes' | head -1)
[ "$bufs" = "67108864 bytes" ] && ok "a told 100 Gbit/s at 10 s sizes the core's buffers to 64 MiB, not 256" ||
	fail "buffers for a told 100 Gbit/s, 10 s: '$bufs', want 67108864 bytes"
px_done
