#!/usr/bin/env bash
# proxy_recover.test.sh: many streams recovering at once over a slow link.
#
#   100 clients --> edge 127.0.0.1:L ==TLS (paced at 20 Mbit/s, 40 ms)==> core --> server
#
# The edge loses its chunks but keeps its store's identity (its data files
# deleted while it was stopped, as after its store directory was removed in
# use and made again): the core still believes it holds them.  Then 100
# downloads of 1 MB at once of data both had stored: every frame the edge
# lacks is asked for and learned, for all of them at once, over a link that
# takes 40 s to carry it all.  Every download must be byte-exact and none
# reset.  Before, a core stream's encoder that rested (quiet for 5-10 s
# after its data ended, waiting for the slow link) while its peer could
# still ask dropped its compressor's unsent end, and the LEARNs that
# followed began a new residual stream in the middle of the peer's: 18-42
# of 100 were reset ("residual (LZ) coding or decoding failed").
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup

P=$(px_port) S1=$(px_port) S2=$(px_port) L=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
N=100 SIZE=1000000 SEEDS=40
pair() {  # [args for both]
	px_core core "$P" "$S1" --allow=127.0.0.0/8 --store_size=256M "$@"
	px_edge edge "$P" "$S2" "--forward=127.0.0.1:$L -> 127.0.0.1:$SRV" --store_size=256M "$@"
}
gets() {  # how many at once: prints one outcome per line
	seq 0 $((N - 1)) | head -n "$1" | xargs -P "$1" -I{} sh -c \
		"timeout -k 2 200 python3 $PXTOOL get 127.0.0.1 $L \$((500 + {} % $SEEDS)) $SIZE --timeout=180 | cut -d' ' -f1"
}

# both stores learn the data, at loopback speed
pair
out=$(seq 0 $((SEEDS - 1)) | xargs -P 8 -I{} sh -c \
	"timeout 60 python3 $PXTOOL get 127.0.0.1 $L \$((500 + {})) $SIZE --timeout=50 | cut -d' ' -f1" |
	sort | uniq -c | tr -s ' ')
case "$out" in " $SEEDS ok") ok "both stores hold $SEEDS files" ;; *) fail "filling the stores: $out" ;; esac
px_stop edge
px_stop core
# the edge's chunks gone, its identity kept
rm -f "$T"/edge.store/*.dat "$T"/edge.store/*.idx
pair --link_rate=20M --link_rtt=40ms
r0=$(px_resets edge core)
t0=$(date +%s)
out=$(gets $N | sort | uniq -c | tr -s ' ')
dt=$(( $(date +%s) - t0 ))
case "$out" in " $N ok") ok "$N downloads recovering at once over 20 Mbit/s: all byte-exact in ${dt}s" ;;
*) fail "$N downloads recovering at once: $out (in ${dt}s)" ;; esac
n=$(( $(px_resets edge core) - r0 ))
[ "$n" = 0 ] && ok "no stream reset" ||
	fail "$n reset lines: $(grep -h "reset" "$T/edge.log" "$T/core.log" | tail -n 2 | cut -c26-250)"
asks=$(px_stat "$S2" 'j["total"]["asks"]')
[ "$asks" -gt 0 ] && ok "the edge asked $asks times" || fail "no asks: the edge did not lose its chunks?"
px_done
