#!/usr/bin/env bash
# proxy_failover.test.sh: the core dies or freezes under live streams.
#
#   client --> edge e1 127.0.0.1:L1 (fail_open = refuse) ==TLS==+
#                                                                +==> core 127.0.0.1:P --> server
#   client --> edge e2 127.0.0.1:L2 (fail_open = direct) ==TLS==+         (e2 direct: ----> server)
#
# 0. A forward of e2 to a target outside the core's allow: the core turns
#    the stream back, and e2 (fail_open = direct) sends it direct.
# 1. SIGKILL of the core in the middle of a slow download (e1) and of an
#    interactive echo session (e2): both client connections are reset
#    promptly (never left hanging, never ended with a clean EOF that would
#    look like a complete transfer).
# 2. While the core is down: e1 refuses new connections promptly, with a log
#    line, and nothing reaches the server; e2 goes direct and the bytes are
#    exact.
# 3. The core comes back: both edges reconnect and transfers go through the
#    tunnel again.
# 4. SIGSTOP of the core (unreachable, no FIN: only keepalives can tell): the
#    live stream is reset within a few seconds, e1 refuses, e2 goes direct;
#    after SIGCONT the tunnels recover.
# 5. An edge SIGKILLed mid-transfer: the core frees the streams at once and
#    keeps serving the other edge.
# 6. An edge itself stopped for 1.5 s (a paused VM, a debugger, swapping)
#    with an echo session open: on waking it keeps its tunnel and the session
#    (it did not hear the core because it was not listening), logs the stall,
#    and its stats show it.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup

P=$(px_port) S1=$(px_port) S2=$(px_port) S3=$(px_port) L1=$(px_port) L2=$(px_port) L3=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
px_server srv6 ::1 # outside the core's allow
SRV6=$(cat "$T/srv6.port")
core() { px_core core "$P" "$S1" --allow=127.0.0.0/8; }
core
px_edge e1 "$P" "$S2" "--forward=127.0.0.1:$L1 -> 127.0.0.1:$SRV"
px_edge e2 "$P" "$S3" "--forward=127.0.0.1:$L2 -> 127.0.0.1:$SRV" "--forward=127.0.0.1:$L3 -> [::1]:$SRV6" \
	--fail_open=direct
MB=$((1 << 20))

expect "through e1 before the failure" pxt get 127.0.0.1 "$L1" 1 $MB
expect "through e2 before the failure" pxt get 127.0.0.1 "$L2" 2 $MB
# a forward whose target the core refuses: with fail_open = direct, e2 sends
# it direct, what the client sent first
expect "e2 forward outside the core's allow goes direct (fail_open = direct)" pxt put 127.0.0.1 "$L3" 3 $((100 << 10))
grep -q "going direct: the core's allow list refuses it (the [0-9]* bytes read go first)" "$T/e2.log" &&
	ok "... the edge says so: $(grep -m1 "the core's allow list refuses it" "$T/e2.log" | cut -c26-)" ||
	fail "no hand-over line in e2's log"

# A stream cut by the failure must end with a reset within `within` seconds.
check_reset() {  # what within
	if [ "$BG_RC" = 124 ]; then
		fail "$1: still hanging ${2}s after the failure: $BG_OUT"
	else
		case $BG_OUT in
		reset*) ok "$1: reset ${BG_SECS}s after the failure (${BG_OUT%%:*})" ;;
		*) fail "$1: ended '$BG_OUT' ${BG_SECS}s after the failure; expected a reset" ;;
		esac
	fi
}
# New forwards with the core unreachable.
check_down() {  # label
	local out t0 dt r0
	r0=$(px_count_log e1 "refused: tunnel to the core is down")
	t0=$(date +%s)
	out=$(pxt get 127.0.0.1 "$L1" 61 $MB --timeout=10 2>&1) || true
	dt=$(( $(date +%s) - t0 ))
	case $out in
	reset*) [ $dt -le 3 ] && ok "$1: e1 refused a new connection in ${dt}s ($out)" ||
		fail "$1: e1 took ${dt}s to refuse a new connection" ;;
	*) fail "$1: e1, new connection: expected a prompt reset (not a clean EOF), got '$out'" ;;
	esac
	[ "$(px_count_log e1 "refused: tunnel to the core is down")" -gt "$r0" ] && ok "$1: e1 logged the refusal" ||
		fail "$1: e1 did not log the refusal"
	[ "$(px_count_log srv "request GET 61 ")" -eq 0 ] && ok "$1: nothing reached the server from e1" ||
		fail "$1: a refused connection reached the server"
	local d0
	d0=$(px_count_log e2 "(direct)")
	expect "$1: e2 goes direct (fail_open = direct), 3 MiB" pxt get 127.0.0.1 "$L2" 62 $((3 * MB))
	expect "$1: e2 goes direct, upload 1 MiB" pxt put 127.0.0.1 "$L2" 63 $MB
	[ "$(px_count_log e2 "(direct)")" -gt "$d0" ] && ok "$1: e2 logged direct connections" ||
		fail "$1: e2 has no direct connection in its log"
}
# The tunnels come back: both edges carry transfers through the core again.
check_back() {  # label e1-up-count e2-up-count
	px_wait_count e1 "tunnel up" "$2" 15 && px_wait_count e2 "tunnel up" "$3" 15 &&
		ok "$1: both edges reconnected" || fail "$1: an edge did not reconnect"
	local c0
	c0=$(px_count_log core "open 127.0.0.1")
	expect "$1: through e1 again" pxt get 127.0.0.1 "$L1" 64 $MB
	expect "$1: through e2 again" pxt put 127.0.0.1 "$L2" 65 $MB
	[ "$(px_count_log core "open 127.0.0.1")" -ge $((c0 + 2)) ] && ok "$1: both went through the core" ||
		fail "$1: the transfers did not go through the core"
}

# ---- 1. SIGKILL mid-transfer ----
rm -f "$T/p1"
px_bg slow1 slowget 127.0.0.1 "$L1" 5 $((40 * MB)) $((2 * MB)) --progress="$T/p1" --timeout=60
px_bg live2 live 127.0.0.1 "$L2" 60 --ready="$T/p2" --timeout=60
px_wait_file "$T/p1" && px_wait_file "$T/p2"
sleep 0.3
kill -KILL "${PID[core]}"
unset "PID[core]"
px_bg_wait slow1 5
check_reset "download through e1 when the core was killed" 5
px_bg_wait live2 5
check_reset "echo session through e2 when the core was killed" 5
px_wait_log e1 "tunnel down" 5 && px_wait_log e2 "tunnel down" 5 && ok "both edges logged the tunnel loss" ||
	fail "an edge did not notice the tunnel loss"

# ---- 2. core down ----
check_down "core killed"
# the edges count what did not go through the tunnel (stats published once a second)
r1=$(px_stat_wait "$S2" 'j["connections"]["refused"] > 0' True)
d2=$(px_stat_wait "$S3" 'j["connections"]["direct"] > 0' True)
[ "$r1" = True ] && [ "$d2" = True ] &&
	ok "e1 counts refused connections, e2 direct ones: $("$BIN" stats --stats=127.0.0.1:"$S3" | grep 'not through the tunnel')" ||
	fail "connections not through the tunnel: e1 refused counted $r1, e2 direct counted $d2"

# ---- 3. recovery ----
core
check_back "core restarted" 2 2

# ---- 4. frozen core ----
rm -f "$T/p3"
px_bg live3 live 127.0.0.1 "$L1" 60 --ready="$T/p3" --timeout=60
px_wait_file "$T/p3"
sleep 0.3
kill -STOP "${PID[core]}"
px_bg_wait live3 6
check_reset "echo session through e1 when the core froze" 6
px_wait_count e1 "tunnel down" 2 5 && ok "e1 declared the frozen core's tunnel down" || fail "e1 kept the frozen tunnel"
px_wait_count e2 "tunnel down" 2 5 || true
check_down "core frozen"
kill -CONT "${PID[core]}"
check_back "core thawed" 3 3

# ---- 5. an edge killed mid-transfer: the core lets go of the target ----
rm -f "$T/p5"
px_bg slow5 slowget 127.0.0.1 "$L1" 6 $((40 * MB)) $((2 * MB)) --progress="$T/p5" --timeout=60
px_wait_file "$T/p5"
kill -KILL "${PID[e1]}"
unset "PID[e1]"
for i in $(seq 50); do [ "$(px_stat "$S1" 'j["total"]["active_streams"]')" -eq 0 ] && break; sleep 0.1; done
a=$(px_stat "$S1" 'j["total"]["active_streams"]')
[ "$a" -eq 0 ] && ok "edge killed: the core freed its streams ($(grep "the tunnel went down" "$T/core.log" | tail -n 1 | cut -c26-80)...)" ||
	fail "edge killed: $a streams still active at the core"
px_bg_wait slow5 5
case $BG_OUT in ok*) fail "a download through a killed edge completed?" ;; *) ok "the client of the killed edge: ${BG_OUT%%:*}" ;; esac
expect "the other edge still carries traffic" pxt get 127.0.0.1 "$L2" 66 $MB

# ---- 6. the edge held, not the core ----
d0=$(px_count_log e2 "tunnel down")
rm -f "$T/p6"
px_bg live6 live 127.0.0.1 "$L2" 4 --ready="$T/p6" --timeout=30
px_wait_file "$T/p6"
sleep 0.5
kill -STOP "${PID[e2]}"
sleep 1.5
kill -CONT "${PID[e2]}"
px_bg_wait live6 15
case $BG_OUT in ok*) ok "edge stopped 1.5 s: the echo session went on (${BG_OUT#ok })" ;;
*) fail "edge stopped 1.5 s: the echo session ended '$BG_OUT'" ;; esac
[ "$(px_count_log e2 "tunnel down")" -eq "$d0" ] && ok "edge stopped 1.5 s: it kept its tunnel" ||
	fail "edge stopped 1.5 s: it dropped a healthy tunnel on waking ($(grep "tunnel down" "$T/e2.log" | tail -n 1 | cut -c26-))"
px_wait_log e2 "event loop held for" 2 && ok "edge stopped 1.5 s: logged ($(grep -o "held for [0-9]* ms" "$T/e2.log" | tail -n 1))" ||
	fail "edge stopped 1.5 s: no stall in its log"
lag=$(px_stat "$S3" 'j["loop_lag_max_us"]')
[ "$lag" -ge 1200000 ] && ok "edge stopped 1.5 s: loop_lag_max_us $lag" || fail "edge stopped 1.5 s: loop_lag_max_us $lag"
holds=$(px_stat "$S3" 'j["loop_holds"]') sum=$(px_stat "$S3" 'j["loop_lag_us"]')
[ "$holds" -ge 1 ] && [ "$sum" -ge "$lag" ] && ok "edge stopped 1.5 s: loop_holds $holds, loop_lag_us $sum" ||
	fail "edge stopped 1.5 s: loop_holds $holds, loop_lag_us $sum"
line=$("$BIN" stats --stats=127.0.0.1:"$S3" | grep -F "longest event loop stall" || true)
case $line in *" of 500 ms or more)") ok "wanopt stats: $line" ;; *) fail "wanopt stats: '$line'" ;; esac
px_done
