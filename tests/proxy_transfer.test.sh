#!/usr/bin/env bash
# proxy_transfer.test.sh: byte-exact transfers through an edge/core pair on
# loopback (real processes, real TLS), and the second transfer of the same
# data crossing far fewer WAN bytes.
#
#   client --> edge 127.0.0.1:L  ==TLS tunnel==>  core 127.0.0.1:P  --> server 127.0.0.1:SRV
#              edge [::1]:L6     (same tunnel)                        --> server [::1]:SRV
#              edge 127.0.0.1:LN (same tunnel)                        --> server localhost:SRV
#
# Downloads (server -> client), uploads (client -> server, the client
# half-closes and then reads the server's verdict), the server half-closing
# first while the client still uploads, both directions at once (echo);
# sizes 0, 1, 1 KiB, 1 MiB and 100 MiB; 50 concurrent streams of mixed sizes
# and kinds (cold, then on warm stores); IPv6 on the LAN sides.  Every transfer is checked by sha256 of
# seed-generated data (tests/proxy/pxtool.py).  The stats' LAN counters must
# match the bytes moved exactly.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup

P=$(px_port) S1=$(px_port) S2=$(px_port) L=$(px_port) L6=$(px_port) LN=$(px_port)
px_server srv "::"
SRV=$(cat "$T/srv.port")
# Each daemon reads runs of stored chunks its own way, whatever this host's
# probe would pick: the core through 128 KiB preads, the edge straight out
# of its mappings; the repeats below go through both, each way encoding and
# decoding (downloads and uploads).
WANOPT_STORE_READS=window px_core core "$P" "$S1" --allow=127.0.0.0/8,[::1]/128
WANOPT_STORE_READS=map px_edge edge "$P" "$S2" "--forward=127.0.0.1:$L -> 127.0.0.1:$SRV" \
	"--forward=[::1]:$L6 -> [::1]:$SRV" "--forward=127.0.0.1:$LN -> localhost:$SRV"
if [ "$(px_count_log core "are read through 128 KiB preads (as WANOPT_STORE_READS says)")" = 1 ] &&
	[ "$(px_count_log edge "are read through the mapping (as WANOPT_STORE_READS says)")" = 1 ]; then
	ok "the core reads runs through windows, the edge through its mappings, as told"
else
	fail "the daemons did not read runs the ways WANOPT_STORE_READS named"
fi

MB=$((1 << 20))
big=$((100 * MB + 12345))
seed=1
for size in 0 1 1024 $MB $big; do
	seed=$((seed + 1))
	expect "download $size bytes" pxt get 127.0.0.1 "$L" $seed $size
	seed=$((seed + 1))
	expect "upload $size bytes, half-close, reply" pxt put 127.0.0.1 "$L" $seed $size
done
expect "echo 1 MiB both ways at once" pxt echo 127.0.0.1 "$L" 20 $MB
expect "echo 20 MiB both ways at once" pxt echo 127.0.0.1 "$L" 21 $((20 * MB))
expect "server half-closes first, client uploads 3 MiB" pxt take 127.0.0.1 "$L" 22 $((3 * MB)) "$T/take1"
expect "server half-closes first, client uploads 0 bytes" pxt take 127.0.0.1 "$L" 23 0 "$T/take2"
expect "IPv6 download 1 MiB" pxt get ::1 "$L6" 24 $MB
expect "IPv6 upload 1 MiB" pxt put ::1 "$L6" 25 $MB
expect "host-name target (resolved by the core), 1 MiB" pxt get 127.0.0.1 "$LN" 26 $MB
expect "50 concurrent streams (get/put/echo, 0 B..3 MB)" pxt many 127.0.0.1 "$L" 50 30
# Again with the same data: both stores now hold it, and concurrent streams
# link chunks in different orders on each side (this once reset streams with
# "corrupt encoded stream").
expect "50 concurrent streams, same data again" pxt many 127.0.0.1 "$L" 50 30
expect "50 concurrent streams, overlapping data" pxt many 127.0.0.1 "$L" 50 33

# Exact LAN accounting: a download of n bytes adds n to the edge's lan_out.
before=$(px_stat "$S2" 'j["total"]["lan_out"]')
expect "download 777777 bytes" pxt get 127.0.0.1 "$L" 40 777777
after=$(px_stat "$S2" 'j["total"]["lan_out"]')
if [ $((after - before)) -eq 777777 ]; then ok "edge lan_out grew by exactly 777777"
else fail "edge lan_out grew by $((after - before)), expected 777777"; fi

# The same data again: far fewer WAN bytes, in each direction.
size=$((16 * MB))
w0=$(px_stat "$S2" 'j["total"]["wan_in"]')
expect "first download of 16 MiB" pxt get 127.0.0.1 "$L" 50 $size
w1=$(px_stat "$S2" 'j["total"]["wan_in"]')
expect "second download of the same 16 MiB" pxt get 127.0.0.1 "$L" 50 $size
w2=$(px_stat "$S2" 'j["total"]["wan_in"]')
first=$((w1 - w0)) second=$((w2 - w1))
echo "     download WAN bytes: first $first, second $second"
if [ $first -gt $((size / 4)) ] && [ $((second * 20)) -lt $first ] && [ $second -lt $((size / 100)) ]; then
	ok "second download crossed $second WAN bytes, first $first (< 1/20)"
else
	fail "second download crossed $second WAN bytes, first $first: expected < 1/20 and < 1 % of $size"
fi
# A live stream's figures move while it runs, at the encoding end too (the
# core's per-stream DRE hits used to stay 0 until the stream closed).
rm -f "$T/hot.p"
px_bg hot slowget 127.0.0.1 "$L" 50 $((8 * MB)) $((4 * MB)) --progress="$T/hot.p" --timeout=30
px_wait_file "$T/hot.p"
sleep 0.5
hits=$(px_stat "$S1" 'max([s["dre_hit_bytes"] for s in j["streams"]] or [0])')
px_bg_wait hot 30
[ "$BG_RC" = 0 ] || fail "slow hot download: $BG_OUT"
[ "$hits" -gt 0 ] && ok "the core shows a live stream's DRE hits: $hits bytes" ||
	fail "the core shows no DRE hits for a live hot stream"
w0=$(px_stat "$S2" 'j["total"]["wan_out"]')
expect "first upload of 16 MiB" pxt put 127.0.0.1 "$L" 51 $size
w1=$(px_stat "$S2" 'j["total"]["wan_out"]')
expect "second upload of the same 16 MiB" pxt put 127.0.0.1 "$L" 51 $size
w2=$(px_stat "$S2" 'j["total"]["wan_out"]')
first=$((w1 - w0)) second=$((w2 - w1))
echo "     upload WAN bytes: first $first, second $second"
if [ $first -gt $((size / 4)) ] && [ $((second * 20)) -lt $first ] && [ $second -lt $((size / 100)) ]; then
	ok "second upload crossed $second WAN bytes, first $first (< 1/20)"
else
	fail "second upload crossed $second WAN bytes, first $first: expected < 1/20 and < 1 % of $size"
fi
# The per-connection log line of that last upload shows the reduction too.
line=$(grep -F "close " "$T/edge.log" | tail -n 1)
case $line in
*"% less"*) ok "edge logged the connection: ${line#*close }" ;;
*) fail "no per-connection close line with a reduction in the edge log: $line" ;;
esac

# Edges offering older protocols (as older builds would): the tunnel comes
# up at that version and its streams carry the DRE stream version of the
# same number both ways (1: XXH64 frame checksums, 2: no AGAIN), and repeated
# data is still hot.  The data is a sparse image (seed 900 up: every other
# 64 KiB block zeros), which version 3 sends with AGAIN.
for v in 1 2 3; do
	S3=$(px_port) L1=$(px_port)
	if [ $v -lt 3 ]; then
		px_edge edge$v "$P" "$S3" --protocol_max=$v "--forward=127.0.0.1:$L1 -> 127.0.0.1:$SRV"
		grep -q "tunnel up: .*(version $v" "$T/edge$v.log" && grep -q "tunnel up: .*(version $v" "$T/core.log" &&
			ok "a protocol-$v edge and a protocol-3 core agree on version $v" || fail "no version-$v tunnel in the logs"
	else
		S3=$S2 L1=$L
	fi
	w0=$(px_stat "$S3" 'j["total"]["wan_in"]')
	expect "protocol $v: download a 4 MiB sparse image" pxt get 127.0.0.1 "$L1" $((900 + v)) $((4 * MB))
	w1=$(px_stat "$S3" 'j["total"]["wan_in"]')
	expect "protocol $v: the same image again" pxt get 127.0.0.1 "$L1" $((900 + v)) $((4 * MB))
	w2=$(px_stat "$S3" 'j["total"]["wan_in"]')
	[ $(((w2 - w1) * 20)) -lt $((w1 - w0)) ] && ok "protocol $v: second download crossed $((w2 - w1)) WAN bytes, first $((w1 - w0))" ||
		fail "protocol $v: second download crossed $((w2 - w1)) WAN bytes, first $((w1 - w0))"
	expect "protocol $v: upload a 2 MiB sparse image" pxt put 127.0.0.1 "$L1" $((910 + v)) $((2 * MB))
	if [ $v -lt 3 ]; then
		n=$(px_resets edge$v)
		[ "$n" -eq 0 ] && ok "protocol $v: no resets logged" || fail "protocol $v: $n resets logged"
	fi
done

# No stream was reset along the way, and both daemons are still up.
n=$(px_resets edge core)
[ "$n" -eq 0 ] && ok "no resets logged" || fail "$n resets logged"
px_alive core && px_alive edge && ok "both daemons alive" || fail "a daemon died"
active=$(px_stat "$S2" 'j["total"]["active_streams"]')
[ "$active" -eq 0 ] && ok "no stream left active" || fail "$active streams still active on the edge"

# A client that resets its connection mid-upload: the server must see a
# reset, never a clean end after fewer bytes (whichever read at the edge
# meets the error, libevent's or the relay's own into the encoder).
expect "client resets after 3 MiB: the server sees a reset" pxt abort 127.0.0.1 "$L" 27 $((3 * MB)) "$T/abort1"
expect "client resets after 100 kB: the server sees a reset" pxt abort 127.0.0.1 "$L" 28 100000 "$T/abort2"
px_alive core && px_alive edge && ok "both daemons alive after the resets" || fail "a daemon died"
px_done
