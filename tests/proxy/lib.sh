# lib.sh: shared setup for the proxy end-to-end tests (tests/proxy*.test.sh),
# sourced after `cd` to the repository root.
#
# Every test gets a fresh directory $T (certificates, stores, logs), its own
# ports (random, checked free, never reused within the test), and a cleanup on
# EXIT that stops every process it started (by pid) and removes $T; on failure
# the tail of every daemon log is printed first.  Nothing here is timing-tight:
# waits poll up to a generous bound.
#
#   px_setup                      make $T and a PKI in $T/pki
#   px_port                       print an unused TCP port
#   px_server NAME [HOST]         start a pxtool server; its port in $T/NAME.port
#   px_core NAME PORT STATS ARGS  start a core (store $T/NAME.store), wait for its listener
#   px_edge NAME PEER STATS ARGS  start an edge (store $T/NAME.store), wait for "tunnel up"
#   px_stop NAME [SIGNAL]         signal a daemon and wait for it to exit
#   px_stat STATS EXPR            a figure from `wanopt stats --json` (python expr on j)
#   px_wait_log NAME TEXT [SECS]  wait until NAME's log contains TEXT
#   pxt ARGS                      run pxtool.py (bounded by timeout)
#   ok / fail MSG / expect ...    assertions

BIN=${BINDIR:-bin}/wanopt
PXTOOL=tests/proxy/pxtool.py
# 1 for a sanitizer build (make asan/ubsan, SAN=thread): memory figures mean little there
PX_SAN=$(grep -qa "__asan_init\|__ubsan_handle\|__tsan_init" "$BIN" 2>/dev/null && echo 1 || echo 0)
T=""
FAILS=0
declare -A PID=()
CLEANUP_HOOK=${CLEANUP_HOOK:-}
PX_MOUNTS=() # tmpfs mounts of px_tmpfs, unmounted at cleanup

px_cleanup() {
	local rc=$?
	set +e
	for n in "${!PID[@]}"; do kill -TERM "${PID[$n]}" 2>/dev/null; done
	for i in $(seq 20); do
		local alive=0
		for n in "${!PID[@]}"; do kill -0 "${PID[$n]}" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for n in "${!PID[@]}"; do kill -KILL "${PID[$n]}" 2>/dev/null; done
	[ -n "$CLEANUP_HOOK" ] && $CLEANUP_HOOK
	for m in "${PX_MOUNTS[@]}"; do umount -l "$m" 2>/dev/null; done
	# a sanitizer build (make asan / ubsan, SAN=thread) reports into the daemon logs
	local san="ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer"
	if [ -n "$T" ] && grep -l "$san" "$T"/*.log 2>/dev/null; then
		echo "FAIL sanitizer reports in the logs above:"
		grep -h -A 12 "$san" "$T"/*.log | head -n 60
		rc=1
	fi
	if [ $rc -ne 0 ] && [ -n "$T" ]; then
		for f in "$T"/*.log; do
			[ -e "$f" ] || continue
			echo "---- last lines of $(basename "$f")"
			tail -n 15 "$f"
		done
	fi
	[ -n "$T" ] && [ -z "${KEEP:-}" ] && rm -rf "$T"
	[ -n "${KEEP:-}" ] && echo "kept $T"
	exit $rc
}

# Mounts a tmpfs of SIZE (mount's -o size) on DIR, made if absent, and
# unmounts it at cleanup; mount's status (root only).
px_tmpfs() {  # dir size
	mkdir -p "$1"
	mount -t tmpfs -o size="$2" tmpfs "$1" 2>/dev/null || return 1
	PX_MOUNTS+=("$1")
}

px_setup() {
	T=$(mktemp -d /tmp/wanopt-e2e.XXXXXX)
	trap px_cleanup EXIT
	trap 'exit 143' TERM INT
	[ -x "$BIN" ] || { echo "no $BIN: run make first"; exit 1; }
	"$BIN" pki init "$T/pki" >/dev/null 2>&1 || { echo "pki init failed"; exit 1; }
}

# A port free on 127.0.0.1 and ::1, below the ephemeral range, not yet given out
# in this test (other tests run concurrently on this machine: never fixed ports).
px_port() {
	python3 - "$T/ports" <<'PY'
import random, socket, sys
used = set(open(sys.argv[1]).read().split()) if __import__("os").path.exists(sys.argv[1]) else set()
for _ in range(500):
    p = random.randrange(20000, 32000)
    if str(p) in used:
        continue
    try:
        for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            s = socket.socket(fam)
            s.bind((host, p))
            s.close()
    except OSError:
        continue
    open(sys.argv[1], "a").write("%d\n" % p)
    print(p)
    break
PY
}

# Runs a daemon in the background: name, then wanopt arguments.
px_run() {
	local n=$1
	shift
	"$BIN" "$@" >>"$T/$n.log" 2>&1 &
	PID[$n]=$!
}

px_alive() { kill -0 "${PID[$1]}" 2>/dev/null; }

px_wait_log() {  # name text [seconds]
	local n=$1 text=$2 secs=${3:-10} i
	for i in $(seq $((secs * 10))); do
		grep -qF -- "$text" "$T/$n.log" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "timed out after ${secs}s waiting for '$text' in $n.log"
	return 1
}

# Counts lines of name's log containing text.
px_count_log() { grep -cF -- "$2" "$T/$1.log" 2>/dev/null || true; }

px_server() {  # name [host]
	local n=$1 host=${2:-127.0.0.1}
	rm -f "$T/$n.port"
	python3 "$PXTOOL" server --host="$host" --portfile="$T/$n.port" >>"$T/$n.log" 2>&1 &
	PID[$n]=$!
	for i in $(seq 100); do [ -s "$T/$n.port" ] && return 0; sleep 0.1; done
	echo "server $n did not start"
	return 1
}

px_core() {  # name port stats [args...]
	local n=$1 port=$2 stats=$3
	shift 3
	local mark
	mark=$(px_count_log "$n" "tunnel listener on")
	px_run "$n" core --listen=127.0.0.1:"$port" --store="$T/$n.store" --tls_cert="$T/pki/core.crt" \
		--tls_key="$T/pki/core.key" --tls_ca="$T/pki/ca.crt" --stats=127.0.0.1:"$stats" "$@"
	px_wait_count "$n" "tunnel listener on" $((mark + 1)) 10
}

px_edge() {  # name peer-port stats [args...]; NOWAIT=1: do not wait for the tunnel
	local n=$1 port=$2 stats=$3
	shift 3
	local mark
	mark=$(px_count_log "$n" "tunnel up")
	px_run "$n" edge --peer=127.0.0.1:"$port" --store="$T/$n.store" --tls_cert="$T/pki/edge.crt" \
		--tls_key="$T/pki/edge.key" --tls_ca="$T/pki/ca.crt" --stats=127.0.0.1:"$stats" "$@"
	[ -n "${NOWAIT:-}" ] || px_wait_count "$n" "tunnel up" $((mark + 1)) 15
}

# Waits until name's log has at least count lines containing text.
px_wait_count() {  # name text count seconds
	local i
	for i in $(seq $(($4 * 10))); do
		[ "$(px_count_log "$1" "$2")" -ge "$3" ] && return 0
		px_alive "$1" || { echo "$1 exited while waiting for '$2'"; return 1; }
		sleep 0.1
	done
	echo "timed out after ${4}s waiting for '$2' (x$3) in $1.log"
	return 1
}

px_stop() {  # name [signal]: signals and waits (up to 10 s) for the exit; prints its status
	local n=$1 sig=${2:-TERM} rc=0 i
	kill -"$sig" "${PID[$n]}" 2>/dev/null || true
	for i in $(seq 100); do px_alive "$n" || break; sleep 0.1; done
	if px_alive "$n"; then
		echo "$n still running 10 s after SIG$sig"
		return 1
	fi
	wait "${PID[$n]}" 2>/dev/null || rc=$?
	unset "PID[$n]"
	PX_STATUS=$rc
}

# px_resets NAME...: lines mentioning "reset" in those daemons' logs.
px_resets() {
	local n
	for n in "$@"; do cat "$T/$n.log" 2>/dev/null; done | grep -c "reset" || true
}
px_stat() {  # stats-port python-expression-on-j
	"$BIN" stats --json --stats=127.0.0.1:"$1" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(eval(sys.argv[1]))' "$2"
}

# px_stat_wait PORT EXPR WANT: px_stat until it prints WANT (gauges are
# published once a second), for at most 3 s; prints the last value.
px_stat_wait() {
	local v
	for _ in $(seq 30); do
		v=$(px_stat "$1" "$2")
		[ "$v" = "$3" ] && break
		sleep 0.1
	done
	echo "$v"
}

# pxtool with an outer time bound (the tool bounds its own sockets too).
pxt() { timeout -k 2 "${PXT_LIMIT:-120}" python3 "$PXTOOL" "$@"; }

ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }
# expect DESCRIPTION COMMAND...: the command must succeed.
expect() {
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$what: $out"; else fail "$what: $out"; fi
}
px_done() {
	if [ $FAILS -eq 0 ]; then echo "$(basename "$0" .test.sh): all passed"; exit 0; fi
	echo "$(basename "$0" .test.sh): $FAILS failed"
	exit 1
}

# Background clients: px_bg NAME pxtool-args... starts one (output in
# $T/NAME.out); px_bg_wait NAME SECS waits for it to end and sets BG_RC (124
# if it did not end in time: it is then killed), BG_OUT and BG_SECS.
px_bg() {
	local n=$1
	shift
	python3 "$PXTOOL" "$@" >"$T/$n.out" 2>&1 & # bounded by px_bg_wait and its --timeout
	PID[$n]=$!
}
px_bg_wait() {
	local n=$1 secs=$2 t0 i
	t0=$(date +%s.%N)
	for i in $(seq $((secs * 20))); do px_alive "$n" || break; sleep 0.05; done
	BG_RC=0
	if px_alive "$n"; then
		kill -KILL "${PID[$n]}" 2>/dev/null
		wait "${PID[$n]}" 2>/dev/null || true
		BG_RC=124
	else
		wait "${PID[$n]}" 2>/dev/null || BG_RC=$?
	fi
	unset "PID[$n]"
	BG_SECS=$(python3 -c "import time; print('%.1f' % (time.time() - $t0))")
	BG_OUT=$(cat "$T/$n.out")
}
# Waits until FILE exists (SECS, default 10).
px_wait_file() {
	local i
	for i in $(seq $((${2:-10} * 10))); do [ -e "$1" ] && return 0; sleep 0.1; done
	echo "timed out waiting for $1"
	return 1
}
