#!/usr/bin/env bash
# proxy_security.test.sh: who may use the tunnel, and where to.
#
#   client --> edge   (good certs)  ==TLS==+
#   client --> rogue  (another CA)  ==TLS==+==> core 127.0.0.1:P  --> server 0.0.0.0:SRV
#              pxtool rawtls (edge certs, malformed frames) ==TLS==+
#
#   core: allow = 127.0.0.2/32, 127.0.0.1/32:1-1024
#
# 1. Bad certificates: an edge with certificates from another CA, an edge
#    whose own CA differs from the core's, and a TLS client without a
#    certificate never get a tunnel, nor an edge using the core's own
#    certificate (it carries wanopt-core); the core logs the refusal; nothing flows.
# 2. allow: forwards to 127.0.0.2 pass; to 127.0.0.1:SRV (port outside
#    1-1024), to ::1 and to "localhost" (checked after resolution) are refused:
#    the client connection is reset/closed promptly, the core logs it, and the
#    server never sees the request.
# 3. Malformed frames from a peer holding valid edge certificates (garbage
#    instead of HELLO, bad magic, unknown version, unknown frame type, a
#    length over the maximum, unknown flags, DATA for a stream never opened,
#    an even stream id from the client, a truncated frame, plain TCP garbage):
#    the core closes each connection, keeps serving a live stream through the
#    real edge, and still carries new transfers.
# 4. A peer that makes the core's decoders wait for LEARNs it never sends:
#    the streams are reset (at the process's backlog budget, or 30 s after
#    the ask), the core's memory stays bounded.
# 5. 600 connections that never start a TLS handshake do not keep a new edge
#    out; the core says so once a second at most.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup
"$BIN" pki init "$T/pki2" >/dev/null 2>&1

P=$(px_port) S1=$(px_port) S2=$(px_port) S3=$(px_port) S4=$(px_port) S5=$(px_port) S6=$(px_port)
LOK=$(px_port) LNO=$(px_port) LNO6=$(px_port) LNAME=$(px_port) LR=$(px_port)
px_server srv 0.0.0.0
SRV=$(cat "$T/srv.port")
px_core core "$P" "$S1" --allow=127.0.0.2/32,127.0.0.1/32:1-1024
px_edge edge "$P" "$S2" "--forward=127.0.0.1:$LOK -> 127.0.0.2:$SRV" "--forward=127.0.0.1:$LNO -> 127.0.0.1:$SRV" \
	"--forward=127.0.0.1:$LNO6 -> [::1]:$SRV" "--forward=127.0.0.1:$LNAME -> localhost:$SRV"
MB=$((1 << 20))

# ---- 1. certificates ----
refusals0=$(px_count_log core "tunnel refused")
NOWAIT=1 px_run rogue edge --peer=127.0.0.1:"$P" --store="$T/rogue.store" --tls_cert="$T/pki2/edge.crt" \
	--tls_key="$T/pki2/edge.key" --tls_ca="$T/pki2/ca.crt" --stats=127.0.0.1:"$S3" \
	"--forward=127.0.0.1:$LR -> 127.0.0.2:$SRV"
# an edge certificate from another CA, trusting the right CA for the core
px_run rogue2 edge --peer=127.0.0.1:"$P" --store="$T/rogue2.store" --tls_cert="$T/pki2/edge.crt" \
	--tls_key="$T/pki2/edge.key" --tls_ca="$T/pki/ca.crt" --stats=127.0.0.1:"$S4" \
	"--forward=127.0.0.1:$(px_port) -> 127.0.0.2:$SRV"
# the right edge certificate, but a CA that did not sign the core's
px_run rogue3 edge --peer=127.0.0.1:"$P" --store="$T/rogue3.store" --tls_cert="$T/pki/edge.crt" \
	--tls_key="$T/pki/edge.key" --tls_ca="$T/pki2/ca.crt" --stats=127.0.0.1:"$S5" \
	"--forward=127.0.0.1:$(px_port) -> 127.0.0.2:$SRV"
# the core's own certificate (signed by the right CA) posing as an edge's
px_run rogue4 edge --peer=127.0.0.1:"$P" --store="$T/rogue4.store" --tls_cert="$T/pki/core.crt" \
	--tls_key="$T/pki/core.key" --tls_ca="$T/pki/ca.crt" --stats=127.0.0.1:"$S6" \
	"--forward=127.0.0.1:$(px_port) -> 127.0.0.2:$SRV"
for r in rogue rogue2 rogue3 rogue4; do px_wait_log $r "started" 10; done
px_wait_count core "tunnel refused" $((refusals0 + 2)) 10 || true
sleep 2 # a few reconnect attempts each
for r in rogue rogue2 rogue3 rogue4; do
	if ! px_alive $r; then fail "$r exited: $(tail -n 1 "$T/$r.log")"
	elif [ "$(px_count_log $r "tunnel up")" -eq 0 ]; then ok "$r: no tunnel: $(grep -m1 "tunnel:" "$T/$r.log" | cut -c26-)"
	else fail "$r brought a tunnel up"; fi
done
# a refused edge hears the core's TLS alert on every attempt (the core
# reads until the edge's EOF rather than resetting it): its log says so
for r in "rogue2 alert unknown ca" "rogue4 alert bad certificate"; do
	set -- $r; a=${r#* }
	if grep -q "tunnel to .*: connection closed by peer" "$T/$1.log" || ! grep -q "$a; the peer refused" "$T/$1.log"; then
		fail "$1 did not hear the alert each time: $(grep "tunnel to" "$T/$1.log" | cut -c26- | sort | uniq -c)"
	else ok "$1 heard the alert each time ($(px_count_log $1 "$a") times)"; fi
done
n=$(( $(px_count_log core "tunnel refused") - refusals0 ))
[ $n -ge 2 ] && ok "the core logged $n refusals: $(grep -m1 "tunnel refused" "$T/core.log" | cut -c26-)" ||
	fail "the core logged $n refusals"
[ "$(px_count_log core "tunnel up")" -eq 1 ] && ok "only the real edge has a tunnel" || fail "the core accepted a rogue"
grep -q "tunnel refused.*its certificate carries the name wanopt-core" "$T/core.log" &&
	ok "the core says why it refused its own certificate: $(grep -m1 "carries the name wanopt-core" "$T/core.log" | cut -c26-)" ||
	fail "no refusal line for the core's certificate posing as an edge's"
out=$(pxt get 127.0.0.1 "$LR" 70 $MB --timeout=10 2>&1) || true
case $out in reset*) ok "a client of the rogue edge gets a reset: $out" ;; *) fail "rogue edge client: $out" ;; esac
[ "$(px_count_log srv "request GET 70 ")" -eq 0 ] && ok "nothing reached the server through the rogue" ||
	fail "the rogue's request reached the server"
out=$(pxt rawtls 127.0.0.1 "$P" hello --ca="$T/pki/ca.crt" --timeout=5 2>&1) || true
case $out in closed*) ok "a TLS client without a certificate is shut out: $out" ;; *) fail "no-certificate client: $out" ;; esac
out=$(pxt rawtls 127.0.0.1 "$P" hello --cert="$T/pki2/edge.crt" --key="$T/pki2/edge.key" --ca="$T/pki/ca.crt" --timeout=5 2>&1) || true
case $out in closed*) ok "a TLS client with another CA's certificate is shut out: $out" ;; *) fail "other-CA client: $out" ;; esac
for r in rogue rogue2 rogue3; do px_stop $r; done
# certificate files that do not load are a configuration error (status 2, which
# the systemd units do not restart), found before the daemon touches its store
for bad in "tls_cert missing.crt" "tls_key core.key" "tls_ca edge.key"; do
	set -- $bad
	declare -A f=([tls_cert]=edge.crt [tls_key]=edge.key [tls_ca]=ca.crt)
	f[$1]=$2
	rc=0
	out=$(timeout 10 "$BIN" edge --peer=127.0.0.1:"$P" --store="$T/bad.store" "--forward=127.0.0.1:$(px_port) -> 127.0.0.2:1" --tls_cert="$T/pki/${f[tls_cert]}" \
		--tls_key="$T/pki/${f[tls_key]}" --tls_ca="$T/pki/${f[tls_ca]}" 2>&1) || rc=$?
	case "$rc $out" in
	"2 --$1=$T/pki/$2: $1: "*) ok "edge with $1 = $2: status 2: $out" ;;
	*) fail "edge with $1 = $2: status $rc: $out" ;;
	esac
done
[ ! -e "$T/bad.store" ] && ok "no store created for a config that fails" || fail "a store was created"
# a store path that cannot be a directory is a configuration error too
touch "$T/a-file"
ln -s "$T/nowhere/x" "$T/a-dangling-link"
for st in "$T/a-file" "$T/a-file/store" "$T/a-dangling-link"; do
	rc=0
	out=$(timeout 10 "$BIN" edge --peer=127.0.0.1:"$P" --store="$st" "--forward=127.0.0.1:$(px_port) -> 127.0.0.2:1" \
		--tls_cert="$T/pki/edge.crt" --tls_key="$T/pki/edge.key" --tls_ca="$T/pki/ca.crt" 2>&1) || rc=$?
	case "$rc $out" in
	"2 --store=$st: store: $st: "*) ok "edge with store = $st: status 2: $out" ;;
	*) fail "edge with store = $st: status $rc: $out" ;;
	esac
done

# ---- 2. allow ----
expect "allowed target 127.0.0.2:$SRV, download" pxt get 127.0.0.1 "$LOK" 71 $MB
expect "allowed target 127.0.0.2:$SRV, upload" pxt put 127.0.0.1 "$LOK" 72 $MB
refused() {  # label port op seed
	local out t0 dt n0 e0
	n0=$(px_count_log core "not in the allow list")
	e0=$(px_count_log edge "target not in the core's allow list")
	t0=$(date +%s)
	out=$(pxt "$3" 127.0.0.1 "$2" "$4" $MB --timeout=10 2>&1) || true
	dt=$(( $(date +%s) - t0 ))
	case $out in
	short*|reset*|mismatch*) [ $dt -le 3 ] && ok "$1 ($3): closed in ${dt}s: $out" || fail "$1 ($3): took ${dt}s" ;;
	*) fail "$1 ($3): expected the connection refused, got '$out'" ;;
	esac
	px_wait_count core "not in the allow list" $((n0 + 1)) 5 && ok "$1 ($3): the core logged it" ||
		fail "$1 ($3): no log line at the core"
	px_wait_count edge "target not in the core's allow list" $((e0 + 1)) 5 && ok "$1 ($3): the edge said why" ||
		fail "$1 ($3): the edge's log does not say the core's allow list refused it"
}
refused "127.0.0.1:$SRV (port not allowed)" "$LNO" get 73
refused "127.0.0.1:$SRV (port not allowed)" "$LNO" put 74
refused "[::1]:$SRV (address not allowed)" "$LNO6" get 75
refused "localhost:$SRV (resolves to a refused address)" "$LNAME" get 76
grep -m1 "not in the allow list" "$T/core.log" | cut -c26- | sed 's/^/     core: /'
if grep -qE "request (GET 7[3-6] |PUT)" "$T/srv.log" && [ "$(grep -c "request PUT" "$T/srv.log")" -gt 1 ]; then
	fail "a refused connection reached the server: $(grep -E 'request (GET 7[3-6] |PUT)' "$T/srv.log")"
else
	ok "no refused connection reached the server"
fi

# ---- 3. malformed frames ----
# (section 4's peer that never answers its asks waits meanwhile)
RAW=(--cert="$T/pki/edge.crt" --key="$T/pki/edge.key" --ca="$T/pki/ca.crt" --target-addr=127.0.0.2 --target-port="$SRV")
python3 "$PXTOOL" backlog 127.0.0.1 "$P" --streams=2 --limit-mib=0 "${RAW[@]}" --timeout=50 >"$T/noanswer.out" 2>&1 &
PID[noanswer]=$!
rm -f "$T/live.ready"
px_bg live live 127.0.0.1 "$LOK" 8 --ready="$T/live.ready" --timeout=30
px_wait_file "$T/live.ready"
for mode in hello garbage badmagic badversion badtype oversize badflags unopened evensid truncated plain; do
	out=$(pxt rawtls 127.0.0.1 "$P" $mode --cert="$T/pki/edge.crt" --key="$T/pki/edge.key" \
		--ca="$T/pki/ca.crt" --target-port="$SRV" --timeout=5 2>&1) || true
	if [ $mode = hello ]; then
		case $out in open*type1*) ok "control: a well-formed peer is answered and kept: $out" ;;
		*) fail "control: a well-formed peer: $out" ;; esac
	else
		case $out in closed*) ok "malformed ($mode): $out" ;; *) fail "malformed ($mode): $out" ;; esac
	fi
	px_alive core || { fail "the core died after '$mode'"; break; }
done
px_bg_wait live 20
[ "$BG_RC" = 0 ] && ok "a live stream through the real edge went on meanwhile: $BG_OUT" ||
	fail "the live stream through the real edge: $BG_OUT"
expect "a new transfer through the real edge" pxt get 127.0.0.1 "$LOK" 77 $((5 * MB))
px_alive core && ok "the core is alive" || fail "the core died"
[ "$(px_count_log edge "tunnel up")" -eq 1 ] && ok "the real edge's tunnel never dropped" ||
	fail "the real edge's tunnel dropped"

# ---- 4. a peer whose frames never complete the wait it causes ----
# Each stream references a chunk nobody stored, so the core asks for it; the
# LEARN never comes.  With more frames behind it on 8 streams at once, the
# streams are reset once all decoders hold 256 MiB (each alone could hold
# 64), and the core's memory stays bounded; with none behind it (2 streams),
# they are reset 30 s (to 35) after the ask.
out=$(pxt backlog 127.0.0.1 "$P" --streams=8 "${RAW[@]}" --timeout=60 2>&1)
case "$out" in "reset 8/8 streams (codes 5)"*) ok "a peer holding the decoders' backlog: $out" ;;
*) fail "a peer holding the decoders' backlog: $out" ;; esac
n=$(px_count_log core "over the process's 256 MiB")
[ "$n" -ge 1 ] && ok "the core reset $n of them at its 256 MiB budget" || fail "no stream reset at the budget"
rss=$(awk '/VmHWM/ {print int($2 / 1024)}' /proc/"${PID[core]}"/status)
lim=512
[ "$PX_SAN" = 1 ] && lim=1024
[ "$rss" -lt $lim ] && ok "the core's peak memory: $rss MiB (bound $lim)" || fail "the core's peak memory: $rss MiB (bound $lim)"
wait "${PID[noanswer]}" || true
unset "PID[noanswer]"
case "$(cat "$T/noanswer.out")" in "reset 2/2 streams (codes 5)"*) ok "asks never answered: $(cat "$T/noanswer.out")" ;;
*) fail "asks never answered: $(cat "$T/noanswer.out")" ;; esac
px_wait_count core "waiting for the LEARN asked for, nothing came on the stream for 30 s" 2 5 && ok "the core said why" ||
	fail "no log line for the unanswered asks"
expect "a transfer through the real edge after them" pxt get 127.0.0.1 "$LOK" 78 $((5 * MB))
px_alive core && ok "the core is alive" || fail "the core died"

# ---- 5. connections that never start their handshake ----
# 600 TCP connections to the tunnel port that send nothing (more than the 256
# handshakes each of the core's workers keeps in progress): a new edge still gets its tunnel,
# the oldest idle ones make room, and the log says so once a second at most.
cat >"$T/idle.py" <<'PY'
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(600)]
open(sys.argv[2], "w").write("held %d\n" % len(held))
time.sleep(float(sys.argv[3]))
PY
ev0=$(px_count_log core "handshakes in progress")
rf0=$(px_count_log core "tunnel refused")
timeout 40 python3 "$T/idle.py" "$P" "$T/idle.ready" 25 &
PID[idle]=$!
px_wait_file "$T/idle.ready"
S6=$(px_port) L6=$(px_port)
# (within 5 s: the idle ones would time out after 10 s and let it in anyway)
NOWAIT=1 px_edge edge3 "$P" "$S6" "--forward=127.0.0.1:$L6 -> 127.0.0.2:$SRV"
px_wait_count edge3 "tunnel up" 1 5 && ok "a new edge got its tunnel past 600 idle connections" ||
	fail "a new edge was kept out by 600 idle connections"
expect "a transfer through it" pxt get 127.0.0.1 "$L6" 79 $MB
n=$(( $(px_count_log core "handshakes in progress") - ev0 ))
[ "$n" -ge 1 ] && [ "$n" -le 10 ] && ok "the core logged it $n time(s): $(grep -m1 "oldest unauthenticated" "$T/core.log" | cut -c26-)" ||
	fail "the core logged the full handshake table $n times"
kill "${PID[idle]}" 2>/dev/null || true
unset "PID[idle]"
sleep 1 # their ends reach the core: 600 refusals, logged 20 in 10 s at most (per worker's burst: one process)
n=$(( $(px_count_log core "tunnel refused") - rf0 ))
[ "$n" -le 25 ] && ok "600 refused connections took $n log lines" || fail "600 refused connections took $n log lines"
px_done
