#!/usr/bin/env bash
# proxy_evict.test.sh: an edge and a core whose stores are much smaller than
# the data passing through them.  Both evict all the time, each on its own
# schedule (each store holds both directions' chunks, and streams running at
# once interleave their writes differently on the two sides), so references
# land near or past what the peer still holds.  Every transfer must still be
# byte-exact, never reset (a miss is asked for and learned), and repeats that
# fit the stores must still cost little.  Then the same on a 20 Mbit/s link,
# where both ends code the bulk on their coder threads.
#
#   client --> edge 127.0.0.1:L ==TLS==> core 127.0.0.1:P --> server 127.0.0.1:SRV
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup

P=$(px_port) S1=$(px_port) S2=$(px_port) L=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
px_core core "$P" "$S1" --allow=127.0.0.0/8 --store_size=16M --log_level=debug
px_edge edge "$P" "$S2" "--forward=127.0.0.1:$L -> 127.0.0.1:$SRV" --store_size=16M --log_level=debug

MB=$((1 << 20))
# rounds PORT ROUNDS MIB SEED...: round after round, each seed's file (MIB
# MiB) downloaded and (seed + 100) uploaded, one at a time, then the
# downloads three at once; every transfer byte-exact
rounds() {
	local port=$1 n=$2 size=$(($3 * MB)) round seed out
	shift 3
	for round in $(seq "$n"); do
		for seed in "$@"; do
			out=$(pxt get 127.0.0.1 "$port" $seed $size) || fail "round $round: download $seed: $out"
			out=$(pxt put 127.0.0.1 "$port" $((seed + 100)) $size) || fail "round $round: upload $((seed + 100)): $out"
		done
		for seed in "$@"; do px_bg "g$seed" get 127.0.0.1 "$port" $seed $size --timeout=60; done
		for seed in "$@"; do
			px_bg_wait "g$seed" 60
			[ "$BG_RC" -eq 0 ] || fail "round $round: concurrent download $seed: $BG_OUT"
		done
	done
}
# three 6 MiB files (sparse-image seeds from 900 have zero blocks: AGAIN runs
# through evicted files too): 18 MiB per round through 16 MiB stores, in
# both directions, one at a time and three at once
rounds "$L" 4 6 11 12 901
ok "4 rounds of 18 MiB each way through 16 MiB stores, one at a time and three at once: byte-exact"
n=$(px_resets edge core)
[ "$n" -eq 0 ] && ok "no stream was reset" || fail "$n stream resets logged"
evicted=$(px_stat "$S1" 'j["store"]["evictions"]')
[ "$evicted" -gt 1000 ] && ok "the core evicted $evicted chunks, the edge $(px_stat "$S2" 'j["store"]["evictions"]')" ||
	fail "the core evicted only $evicted chunks: the test does not test eviction"
echo "     asks: edge $(px_stat "$S2" 'j["total"]["asks"]'), core $(px_stat "$S1" 'j["total"]["asks"]')"
# a repeat small enough for the stores stays cheap after all that
out=$(pxt get 127.0.0.1 "$L" 31 $((3 * MB))) || fail "download 31: $out"
w0=$(px_stat "$S2" 'j["total"]["wan_in"]')
out=$(pxt get 127.0.0.1 "$L" 31 $((3 * MB))) || fail "download 31 again: $out"
w1=$(px_stat "$S2" 'j["total"]["wan_in"]')
[ $((w1 - w0)) -lt $((3 * MB / 20)) ] && ok "a 3 MiB repeat crossed $((w1 - w0)) WAN bytes" ||
	fail "a 3 MiB repeat crossed $((w1 - w0)) WAN bytes"

# The same on a 20 Mbit/s link, where both ends code the bulk with zstd 9 on
# their coder threads
P2=$(px_port) S3=$(px_port) S4=$(px_port) L2=$(px_port)
px_core core2 "$P2" "$S3" --allow=127.0.0.0/8 --store_size=4M --log_level=debug --link_rate=20M
px_edge edge2 "$P2" "$S4" "--forward=127.0.0.1:$L2 -> 127.0.0.1:$SRV" --store_size=4M --log_level=debug --link_rate=20M
rounds "$L2" 3 2 41 42 902
ok "20 Mbit/s link: 3 rounds of 6 MiB each way through 4 MiB stores: byte-exact"
# Many streams at once turn a 4 MiB store over within a round trip: a
# frame's chunks may be evicted before the peer asks for it.  Frames in
# flight pin the files their chunks sit in (the store grows past its
# bound meanwhile), so every ask is answered (before pins: 8-28 of 30 reset).
for r in 1 2; do
	out=$(pxt many 127.0.0.1 "$L2" 30 $((161 + 40 * r)) --sizes=0,100000,1000000) ||
		fail "30 transfers at once, round $r: $(echo "$out" | tail -3)"
done
ok "2 rounds of 30 transfers at once through the 4 MiB stores: byte-exact"
n=$(px_resets edge2 core2)
[ "$n" -eq 0 ] && ok "no stream was reset" || fail "$n stream resets logged"
# the gauges are refreshed each second
sleep 2
for s in "$S3" "$S4"; do
	pins=$(px_stat "$s" 'j["store"]["pins"]') fill=$(px_stat "$s" 'j["store"]["fill_bytes"]')
	[ "$pins" -eq 0 ] && [ "$fill" -le $((4 * MB)) ] &&
		ok "stats port $s: no pins left, the store back within its size ($fill bytes);" \
			"pins kept it at most $(px_stat "$s" 'j["store"]["pinned_over_max"]') bytes over" ||
		fail "stats port $s: $pins pins still held, store $fill bytes"
done
for side in edge2 core2; do
	grep -q "bulk coded on the coder thread (zstd 9)" "$T/$side.log" && ok "$side coded the bulk on its coder thread" ||
		fail "$side: no stream coded on a coder thread"
done
echo "     evictions: edge $(px_stat "$S4" 'j["store"]["evictions"]'), core $(px_stat "$S3" 'j["store"]["evictions"]');" \
	"asks: edge $(px_stat "$S4" 'j["total"]["asks"]'), core $(px_stat "$S3" 'j["total"]["asks"]')"
px_done
