#!/usr/bin/env bash
# proxy_signals.test.sh: SIGHUP reloads and SIGTERM drains, under live streams.
#
#   client --> edge (-c edge.conf: forwards A, B) ==TLS==> core (-c core.conf) --> server
#
# 1. Edge SIGHUP with a new edge.conf (forward B dropped, C added, A kept;
#    store_size shrunk below the store's fill): an interactive session and a
#    bulk download through A run across the reload and stay byte-exact; C
#    works, B is gone, A takes new connections, and every connection to A
#    during 15 more reloads is taken; the store limit and evictions show in
#    the stats.
#    Then 2,000 forwards more, and a reload keeping them all holds the
#    edge's loop briefly (under 1 s; it was 3.1 s).
# 2. Core SIGHUP with a narrower allow: a live stream goes on, new streams to
#    the target are refused; reverting it lets them through again.
# 3. A broken edge.conf on SIGHUP: logged, the running configuration kept;
#    so too one whose new forward cannot listen (none of it applies).
# 4. SIGTERM drains: the edge stops accepting at once, lets the download in
#    flight finish byte-exact, then exits 0; the same for the core, and while
#    the core drains, edges fail open (direct) or refuse by their own rule.  A
#    second SIGTERM exits at once.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup

P=$(px_port) S1=$(px_port) S2=$(px_port) LA=$(px_port) LB=$(px_port) LC=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
MB=$((1 << 20))

edge_conf() {  # store_size forward-listen-ports-or-addresses...
	local size=$1
	shift
	{
		echo "peer = 127.0.0.1:$P"
		echo "store = $T/edge.store"
		echo "store_size = $size"
		echo "tls_cert = $T/pki/edge.crt"
		echo "tls_key = $T/pki/edge.key"
		echo "tls_ca = $T/pki/ca.crt"
		echo "stats = 127.0.0.1:$S2"
		for f in "$@"; do
			case $f in *:*) echo "forward = $f -> 127.0.0.1:$SRV" ;; *) echo "forward = 127.0.0.1:$f -> 127.0.0.1:$SRV" ;; esac
		done
	} >"$T/edge.conf.new"
	mv "$T/edge.conf.new" "$T/edge.conf"
}
core_conf() {  # allow [lan_bulk_streams]
	[ -n "${2:-}" ] && echo "lan_bulk_streams = $2" >"$T/core.conf.new" || : >"$T/core.conf.new"
	cat >>"$T/core.conf.new" <<-EOF
	listen = 127.0.0.1:$P
	allow = $1
	store = $T/core.store
	tls_cert = $T/pki/core.crt
	tls_key = $T/pki/core.key
	tls_ca = $T/pki/ca.crt
	stats = 127.0.0.1:$S1
	EOF
	mv "$T/core.conf.new" "$T/core.conf"
}
start_core() {
	local mark
	mark=$(px_count_log core "tunnel listener on")
	px_run core core -c "$T/core.conf"
	px_wait_count core "tunnel listener on" $((mark + 1)) 10
}
start_edge() {
	local mark
	mark=$(px_count_log edge "tunnel up")
	px_run edge edge -c "$T/edge.conf"
	px_wait_count edge "tunnel up" $((mark + 1)) 15
}
hup() {  # name: SIGHUP and wait for the outcome line
	local n=$1 r0 e0
	r0=$(px_count_log "$n" "reloaded")
	e0=$(px_count_log "$n" "reload: ")
	kill -HUP "${PID[$n]}"
	for i in $(seq 50); do
		[ "$(px_count_log "$n" "reloaded")" -gt "$r0" ] && return 0
		[ "$(px_count_log "$n" "reload: ")" -gt "$e0" ] && return 1
		sleep 0.1
	done
	return 2
}

core_conf 127.0.0.0/8
edge_conf 1G "$LA" "$LB"
start_core
# a second core on the same tunnel address (its own store and stats) exits at
# once: the workers share the port, which must not take another process in
"$BIN" core -c "$T/core.conf" --store="$T/core2.store" --stats=127.0.0.1:"$(px_port)" >"$T/core2.log" 2>&1 &
p2=$!
for i in $(seq 50); do kill -0 $p2 2>/dev/null || break; sleep 0.1; done
if kill -0 $p2 2>/dev/null; then
	kill -KILL $p2
	fail "a second core on the same tunnel address runs: $(tail -n 1 "$T/core2.log")"
else
	rc=0
	wait $p2 || rc=$?
	[ $rc != 0 ] && grep -q "address already in use (another wanopt core?)" "$T/core2.log" &&
		ok "a second core on the same tunnel address exits ($rc): $(grep -m1 "already in use" "$T/core2.log" | cut -c26-)" ||
		fail "a second core on the same tunnel address: status $rc, $(tail -n 1 "$T/core2.log")"
fi
start_edge
expect "forward A before the reload" pxt get 127.0.0.1 "$LA" 1 $MB
expect "forward B before the reload" pxt get 127.0.0.1 "$LB" 2 $MB
# fill the store beyond the limit the reload will set
expect "24 MiB through A (fills the stores)" pxt get 127.0.0.1 "$LA" 3 $((24 * MB))

# ---- 1. edge SIGHUP ----
rm -f "$T/live.ready" "$T/slow.p"
px_bg live live 127.0.0.1 "$LA" 5 --ready="$T/live.ready" --timeout=30
px_bg slow slowget 127.0.0.1 "$LA" 4 $((8 * MB)) $((3 * MB)) --progress="$T/slow.p" --timeout=30
px_wait_file "$T/live.ready" && px_wait_file "$T/slow.p"
edge_conf 8M "$LA" "$LC"
echo "workers = 2" >>"$T/edge.conf" # a core's key: warned about at reload too
hup edge && ok "edge reloaded" || fail "edge reload: $(tail -n 2 "$T/edge.log")"
grep -q "edge.conf:[0-9]*: 'workers' has no effect on an edge" "$T/edge.log" &&
	ok "a core's key in the reloaded file is warned about: $(grep -m1 "'workers' has no effect" "$T/edge.log" | cut -c26-)" ||
	fail "no warning at reload for a core's key in edge.conf"
# the store shrinks a data file per event loop pass, then says so
px_wait_count edge "store: size limit now" 1 10 &&
	ok "store shrunk: $(grep "store: size limit now" "$T/edge.log" | tail -n 1 | cut -c26-)" ||
	fail "no end of the store shrink in the log"
expect "new forward C after the reload" pxt get 127.0.0.1 "$LC" 5 $MB
expect "kept forward A takes new connections" pxt put 127.0.0.1 "$LA" 6 $MB
# connections arriving while the edge reloads again and again: a forward
# the new file keeps keeps its listener, so every one is taken
px_bg churn churn 127.0.0.1 "$LA" 4 4 --timeout=10
n=0
while [ $n -lt 15 ] && px_alive churn && hup edge; do n=$((n + 1)); done
px_bg_wait churn 20
[ "$BG_RC" = 0 ] && [ $n -ge 10 ] && ok "connections to A during $n reloads: $BG_OUT" ||
	fail "connections to A during $n reloads: $BG_OUT"
out=$(pxt get 127.0.0.1 "$LB" 7 $MB --timeout=5 2>&1) || true
case $out in refused*) ok "dropped forward B refuses connections: $out" ;; *) fail "dropped forward B: $out" ;; esac
px_bg_wait live 20
[ "$BG_RC" = 0 ] && ok "interactive session across the reload: $BG_OUT" || fail "interactive session: $BG_OUT"
px_bg_wait slow 20
[ "$BG_RC" = 0 ] && ok "bulk download across the reload: $BG_OUT" || fail "bulk download: $BG_OUT"
sleep 1.2 # the stats gauges tick once a second
size=$(px_stat "$S2" 'j["store"]["size_bytes"]')
fill=$(px_stat "$S2" 'j["store"]["fill_bytes"]')
ev=$(px_stat "$S2" 'j["store"]["evictions"]')
[ "$size" -eq $((8 * MB)) ] && ok "store limit in the stats: $size" || fail "store limit in the stats: $size, expected $((8 * MB))"
[ "$ev" -gt 0 ] && [ "$fill" -le $((9 * MB)) ] && ok "the store shrank: fill $fill, $ev evictions" ||
	fail "the store did not shrink: fill $fill, $ev evictions"
[ "$(px_count_log edge "tunnel up")" -eq 1 ] && ok "the tunnel stayed up" || fail "the tunnel dropped on reload"
# the reload measured again how to read runs of stored chunks (the host may
# have changed under the daemon)
line=$(grep -E "store: runs of stored chunks are (now|still) read" "$T/edge.log" | tail -n 1 | cut -c26-)
us=$(echo "$line" | sed -n 's/.*(\([0-9]*\) us through 128 KiB preads, \([0-9]*\) through the mapping.*/\1 \2/p')
set -- $us
[ "${1:-0}" -gt 0 ] && [ "${2:-0}" -gt 0 ] && ok "measured again on reload: $line" ||
	fail "no new measurement of store reads on reload: '$line'"

# ---- 1b. a reload of many forwards ----
# 2,000 forwards more, each on an address of its own in 127.77/16 (no one
# else's port), then a reload that keeps every one: the edge's loop is held
# briefly, not for the 3.1 s it took when each rule looked at every old
# forward and at the rules before it
many_fwd() { for i in $(seq 0 1999); do echo "127.77.$((i / 250)).$((i % 250 + 1)):$LA"; done; }
edge_conf 8M "$LA" "$LC" $(many_fwd)
hup edge && ok "edge reloaded with 2,000 forwards more" || fail "edge reload with 2,000 forwards: $(tail -n 2 "$T/edge.log")"
expect "the last of them" pxt get 127.77.7.250 "$LA" 10 $MB
sleep 1.2
# (loop_lag_us counts every hold past the 100 ms timer, so its growth over
# the reload is the reload's hold, plus a few ms of scheduling)
lag0=$(px_stat "$S2" 'j["loop_lag_us"]') holds0=$(px_stat "$S2" 'j["loop_holds"]')
hup edge && ok "edge reloaded, keeping all 2,002 forwards" || fail "edge reload keeping 2,002 forwards: $(tail -n 2 "$T/edge.log")"
sleep 1.2
lag=$(($(px_stat "$S2" 'j["loop_lag_us"]') - lag0)) holds=$(($(px_stat "$S2" 'j["loop_holds"]') - holds0))
max=$(px_stat "$S2" 'j["loop_lag_max_us"]')
[ "$lag" -lt 1000000 ] && [ "$holds" = 0 ] &&
	ok "the reload held the loop $((lag / 1000)) ms in all (the longest hold since start: $((max / 1000)) ms)" ||
	fail "the loop held $((lag / 1000)) ms ($holds holds of 500 ms or more) in a reload keeping 2,002 forwards"
expect "the last of them after the reload" pxt get 127.77.7.250 "$LA" 11 $MB
edge_conf 8M "$LA" "$LC"
hup edge && ok "edge reloaded without them" || fail "edge reload back to 2 forwards: $(tail -n 2 "$T/edge.log")"
out=$(pxt get 127.77.7.250 "$LA" 12 $MB --timeout=5 2>&1) || true
case $out in refused*) ok "they are gone: $out" ;; *) fail "a dropped forward of the 2,000: $out" ;; esac
[ "$(px_count_log edge "tunnel up")" -eq 1 ] && ok "the tunnel stayed up" || fail "the tunnel dropped on reload"

# ---- 2. core SIGHUP: allow ----
rm -f "$T/live.ready"
px_bg live live 127.0.0.1 "$LA" 4 --ready="$T/live.ready" --timeout=30
px_wait_file "$T/live.ready"
core_conf 127.0.0.2/32 2
hup core && ok "core reloaded (allow = 127.0.0.2/32, lan_bulk_streams = 2)" || fail "core reload: $(tail -n 2 "$T/core.log")"
px_wait_count edge "the core's allow list has" 2 5 && ok "the core told the edge its new allow list" ||
	fail "the edge did not hear the new allow list: $(grep "allow list" "$T/edge.log" | tail -n 2)"
line=$(grep "LAN receive buffers: at most" "$T/core.log" | tail -n 1 | cut -c26-)
case $line in *"at most 2 streams at once may hold the bulk one (was 8;"*) ok "lan_bulk_streams applied: $line" ;;
*) fail "lan_bulk_streams not applied on reload: '$line'" ;; esac
out=$(pxt get 127.0.0.1 "$LA" 8 $MB --timeout=5 2>&1) || true
case $out in reset*|short*) ok "a new stream to a target no longer allowed is refused: $out" ;;
*) fail "new stream after allow narrowed: $out" ;; esac
px_bg_wait live 20
[ "$BG_RC" = 0 ] && ok "a live stream went on across the core reload: $BG_OUT" || fail "live stream: $BG_OUT"
core_conf 127.0.0.0/8
hup core && ok "core reloaded (allow = 127.0.0.0/8)" || fail "core reload back"
expect "allowed again" pxt get 127.0.0.1 "$LA" 9 $MB

# ---- 3. broken config ----
echo "forward = nonsense" >>"$T/edge.conf"
if hup edge; then fail "a broken edge.conf was accepted"
else ok "broken edge.conf refused: $(grep "reload: " "$T/edge.log" | tail -n 1 | cut -c26-)"; fi
px_alive edge && ok "the edge still runs" || fail "the edge died on a broken reload"
expect "forward A after the refused reload" pxt get 127.0.0.1 "$LA" 10 $MB
expect "forward C after the refused reload" pxt get 127.0.0.1 "$LC" 11 $MB
# a sound file whose new forward cannot listen (the server's port): nothing of it applies
edge_conf 16M "$LA" "$LC" "$SRV"
if hup edge; then fail "a reload whose forward cannot listen was kept"
else ok "forward that cannot listen: $(grep "reload: " "$T/edge.log" | tail -n 1 | cut -c26-)"; fi
sleep 1 # a store_size applied would log its outcome on the next loop pass
[ "$(px_count_log edge "size limit now 16777216")" = 0 ] && ok "... and its store_size was not applied either" ||
	fail "store_size of a failed reload applied: $(grep "size limit now" "$T/edge.log" | tail -n 1)"
expect "forward A after the failed reload" pxt get 127.0.0.1 "$LA" 17 $MB
edge_conf 8M "$LA" "$LC"

# ---- 4. SIGTERM drains ----
drain() {  # name port: SIGTERM under a download in flight
	local n=$1 port=$2 out t0
	rm -f "$T/slow.p"
	px_bg slow slowget 127.0.0.1 "$port" 12 $((6 * MB)) $((3 * MB)) --progress="$T/slow.p" --timeout=30
	px_wait_file "$T/slow.p"
	local pid=${PID[$n]}
	kill -TERM "$pid"
	t0=$(date +%s)
	px_wait_log "$n" "draining" 5 >/dev/null || true
	if [ "$n" = edge ]; then
		out=$(pxt get 127.0.0.1 "$port" 13 $MB --timeout=5 2>&1) || true
		case $out in refused*|short*|reset*) ok "$n draining: new connections refused: $out" ;;
		*) fail "$n draining: a new connection got '$out'" ;; esac
	fi
	px_bg_wait slow 20
	[ "$BG_RC" = 0 ] && ok "$n draining: the download in flight completed: $BG_OUT" ||
		fail "$n draining: the download in flight: $BG_OUT"
	px_stop "$n" TERM || true
	[ "${PX_STATUS:-1}" = 0 ] && ok "$n exited 0 after draining ($(( $(date +%s) - t0 ))s)" ||
		fail "$n exit status ${PX_STATUS:-?} after draining"
}
drain edge "$LA"
start_edge
# while the core drains, a second edge with fail_open = direct must go
# direct, and the first (refuse) must refuse promptly rather than reset
# every new connection on the core's say
S3=$(px_port) LD=$(px_port)
px_edge edge2 "$P" "$S3" "--forward=127.0.0.1:$LD -> 127.0.0.1:$SRV" --fail_open=direct
rm -f "$T/slow.p"
px_bg slow slowget 127.0.0.1 "$LA" 12 $((6 * MB)) $((3 * MB)) --progress="$T/slow.p" --timeout=30
px_wait_file "$T/slow.p"
kill -TERM "${PID[core]}"
px_wait_log core "draining" 5
sleep 0.5
d0=$(px_count_log edge2 "(direct)")
expect "core draining: the fail_open = direct edge goes direct" pxt get 127.0.0.1 "$LD" 15 $MB
[ "$(px_count_log edge2 "(direct)")" -gt "$d0" ] && ok "core draining: ... and logged it as direct" ||
	fail "core draining: edge2 did not go direct"
r0=$(px_count_log edge "refused: tunnel to the core is down")
out=$(pxt get 127.0.0.1 "$LA" 16 $MB --timeout=5 2>&1) || true
[ "$(px_count_log edge "refused: tunnel to the core is down")" -gt "$r0" ] &&
	ok "core draining: the fail_open = refuse edge refuses new connections itself: $out" ||
	fail "core draining: new connection through the refuse edge: $out, not refused by the edge"
u0=$(px_count_log core "tunnel up")
px_bg_wait slow 20
[ "$BG_RC" = 0 ] && ok "core draining: the download in flight completed: $BG_OUT" ||
	fail "core draining: the download in flight: $BG_OUT"
n=$(( $(px_count_log core "tunnel up") - u0 ))
[ "$n" -le 2 ] && ok "core draining: $n tunnels accepted meanwhile (edges do not reconnect in a loop)" ||
	fail "core draining: $n tunnels accepted and sent away while it drained"
px_stop core TERM || true
[ "${PX_STATUS:-1}" = 0 ] && ok "core exited 0 after draining" || fail "core exit status ${PX_STATUS:-?} after draining"
px_stop edge2
mark=$(px_count_log edge "tunnel up")
start_core
px_wait_count edge "tunnel up" $((mark + 1)) 15
rm -f "$T/slow.p"
px_bg slow slowget 127.0.0.1 "$LA" 14 $((30 * MB)) $((3 * MB)) --progress="$T/slow.p" --timeout=30
px_wait_file "$T/slow.p"
kill -TERM "${PID[edge]}"
px_wait_log edge "draining" 5 >/dev/null || true
sleep 0.2
px_stop edge TERM && ok "a second SIGTERM exits at once (status $PX_STATUS)" || fail "the second SIGTERM did not end the edge"
px_bg_wait slow 5
case $BG_OUT in ok*) fail "the download survived a forced exit?" ;;
*) [ "$BG_RC" != 124 ] && ok "the download cut by the forced exit ended: ${BG_OUT%%:*}" ||
	fail "the download cut by the forced exit hangs" ;; esac
px_done
