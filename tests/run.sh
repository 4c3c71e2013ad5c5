#!/usr/bin/env bash
# Runs every test binary given as an argument, then every tests/*.test.sh script,
# each under its own time bound, and ends with one summary line.
# Environment: BINDIR (where wanopt/wanem are), BUILD, TEST_TIMEOUT (seconds, default 300),
# ONLY (a substring: run only matching tests).
set -u
cd "$(dirname "$0")/.."
export BINDIR="${BINDIR:-bin}" BUILD="${BUILD:-build}"
limit="${TEST_TIMEOUT:-300}"
pass=0 fail=0 failed="" start=$(date +%s)
logdir="$BUILD/test-logs"
mkdir -p "$logdir"

run_one() {  # name, command...
	local name=$1; shift
	case "$name" in *"${ONLY:-}"*) ;; *) return 0 ;; esac
	local t0=$(date +%s) rc
	timeout -k 5 "$limit" "$@" >"$logdir/$name.log" 2>&1
	rc=$?
	local dt=$(( $(date +%s) - t0 ))
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); printf '  PASS  %-34s %4ds\n' "$name" "$dt"
	else
		fail=$((fail + 1)); failed="$failed $name"
		[ $rc -eq 124 ] && echo "  (timed out after ${limit}s)" >>"$logdir/$name.log"
		printf '  FAIL  %-34s %4ds  (exit %d, log %s)\n' "$name" "$dt" "$rc" "$logdir/$name.log"
		tail -n 25 "$logdir/$name.log" | sed 's/^/        | /'
	fi
}

for t in "$@"; do run_one "$(basename "$t")" "$t"; done
for s in tests/*.test.sh; do
	[ -e "$s" ] || continue
	run_one "$(basename "$s" .test.sh)" bash "$s"
done
echo "check: $pass passed, $fail failed in $(( $(date +%s) - start ))s${failed:+ (failed:$failed)}"
[ $fail -eq 0 ]
