# tests/netem/lib.sh: helpers for the netem test scripts (sourced).
# Every namespace a test makes starts with wnm-t<pid>- so parallel runs and other
# engineers' tests never collide; wn_cleanup (on EXIT) removes them.

WN_BIN="${BINDIR:-bin}/wanem"
WN_TMP=$(mktemp -d /tmp/wnm-test.XXXXXX)
WN_PREFIX="wnm-t$$-"
WN_PID=""

# Stops wanem (if running), deletes our namespaces and temp files.
wn_cleanup() {
	[ -n "$WN_PID" ] && kill "$WN_PID" 2>/dev/null && wait "$WN_PID" 2>/dev/null
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$WN_PREFIX" || true); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$WN_TMP"
}

# wn_start PROFILE [wanem options]: starts wanem between ${WN_PREFIX}a and ${WN_PREFIX}b
# with real-time priority and waits (at most 5 s) until the link is up.
wn_start() {
	local profile=$1; shift
	rm -f "$WN_TMP/ready"
	"$WN_BIN" "$profile" --ns="${WN_PREFIX}a,${WN_PREFIX}b" --rt --stats="$WN_TMP/stats.json" \
		--ready="$WN_TMP/ready" "$@" &
	WN_PID=$!
	for _ in $(seq 50); do
		[ -s "$WN_TMP/ready" ] && return 0
		kill -0 "$WN_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "wanem did not come up" >&2
	return 1
}

# wn_stop: stops wanem and waits for it (its namespaces go with it).
wn_stop() {
	[ -n "$WN_PID" ] && kill "$WN_PID" 2>/dev/null && wait "$WN_PID" 2>/dev/null
	WN_PID=""
}

# wn_stats: asks wanem for fresh counters and prints the stats JSON.
wn_stats() {
	local seq0
	seq0=$(jget "$(cat "$WN_TMP/stats.json")" seq)
	kill -USR1 "$WN_PID"
	for _ in $(seq 50); do
		[ "$(jget "$(cat "$WN_TMP/stats.json")" seq)" != "$seq0" ] && break
		sleep 0.02
	done
	cat "$WN_TMP/stats.json"
}

# jget JSON KEY[.KEY...]: prints one value from a JSON object.
jget() {
	python3 -c 'import json,sys
v=json.loads(sys.argv[1])
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"
}

# in_a / in_b CMD...: run a command in side A (branch) or B (datacenter).
in_a() { ip netns exec "${WN_PREFIX}a" "$@"; }
in_b() { ip netns exec "${WN_PREFIX}b" "$@"; }

# check NAME OK_EXPR MESSAGE: prints PASS/FAIL; a failure is remembered in WN_FAIL.
WN_FAIL=0
check() {
	if python3 -c "import sys; sys.exit(0 if ($2) else 1)"; then
		echo "ok    $1: $3"
	else
		echo "FAIL  $1: $3"; WN_FAIL=1
	fi
}
