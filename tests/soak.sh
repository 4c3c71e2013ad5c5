#!/usr/bin/env bash
# soak.sh (make soak): an edge/core pair on loopback under mixed traffic for
# SOAK_SECS seconds (default 300), in rounds of 30 concurrent transfers (get,
# put and echo; 0 bytes to 3 MB; half of the rounds repeat earlier data, half
# are new, through stores small enough to evict).  Every third round both
# daemons reload (SIGHUP); every fifth, the core is killed (SIGKILL) while 30
# transfers of up to 12 MB run, and restarted.
# Checks: every round without a kill is byte-exact; in a killed round every
# transfer is byte-exact or reset, never cut short with a clean close or
# wrong; the edge's descriptors and memory do not creep from the first
# rounds to the last; and, with a sanitizer build (make soak SAN=address),
# nothing in the logs.  The edge's two tunnel connections share a pacing cap
# (link_rate 2G: paced, though loopback could go faster), so the shares are
# redone as connections come and go.  SOAK_LINK=20M (or less) gives the edge
# a link on which both daemons code the bulk on their coding threads (zstd 9;
# 16 up to 4M).  SOAK_STORE=4M (say) gives both daemons stores of that size
# instead of 64 and 48 MiB: they turn over within a round trip, so frames in
# flight pin their files.  SOAK_VOLATILE=1 restarts the killed core with its
# store's disk read-only, so that it runs on a volatile store, and remounts it
# read-write a second later: the core goes back to its store under the next
# rounds' traffic, asking the edge to renew its tunnel connections (the
# core is then killed once it has run 12 s, not every fifth round).  Not
# part of make check: it is long by design.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup
px_server srv
SP=$(cat "$T/srv.port")
CP=$(px_port) FP=$(px_port) HC=$(px_port) HE=$(px_port)
core() {
	cstart=$(date +%s)
	px_core core "$CP" "$HC" --allow=127.0.0.0/8 --store_size="${SOAK_STORE:-64M}"
}
vol=${SOAK_VOLATILE:-0}
if [ "$vol" = 1 ]; then
	[ "$(id -u)" = 0 ] || { echo "SOAK_VOLATILE=1 needs root (tmpfs mounts)"; exit 1; }
	px_tmpfs "$T/cdisk" 256m
	px_tmpfs "$T/shm" 256m
	export WANOPT_VOLATILE_DIR="$T/shm"
	mkdir "$T/cdisk/store"
	ln -s "$T/cdisk/store" "$T/core.store"
fi
core
px_edge edge "$CP" "$HE" --forward="127.0.0.1:$FP -> 127.0.0.1:$SP" --store_size="${SOAK_STORE:-48M}" --tunnels=2 \
	--link_rate="${SOAK_LINK:-2G}"
secs=${SOAK_SECS:-300}
end=$(($(date +%s) + secs))
# anonymous memory: the store's mapped file pages come and go with reads
rss() { awk '/RssAnon/ {print $2}' /proc/"${PID[$1]}"/status; }
# descriptors other than the store's data files (one per file: their number
# follows how full the store is, up to about 33 here, not the traffic)
fds() { find /proc/"${PID[$1]}"/fd -mindepth 1 ! -lname '*.store/*.dat' | wc -l; }
dats() { find /proc/"${PID[$1]}"/fd -mindepth 1 -lname '*.store/*.dat' | wc -l; }
many() { timeout 120 python3 "$PXTOOL" many 127.0.0.1 "$FP" 30 "$@" --timeout=90 2>&1; }
k=0 bad=0 kills=0 resets=0 fd0="" rssall=()
while [ "$(date +%s)" -lt $end ]; do
	k=$((k + 1))
	seed=$((k % 2 ? (k % 9) * 100 : k * 1000))
	# (SOAK_VOLATILE: a core up 12 s, time to go back to its store under traffic)
	if [ $((k % 5)) = 0 ] && { [ "$vol" = 0 ] || [ $(($(date +%s) - cstart)) -ge 12 ]; }; then
		out=$(many $seed --sizes=65536,1048576,3000000,12000000 & sleep 0.4; kill -9 "${PID[core]}"; wait) || true
		wait "${PID[core]}" 2>/dev/null || true
		ups=$(px_count_log edge "tunnel up")
		if [ "$vol" = 1 ]; then
			wait "${RW:-}" 2>/dev/null || true
			mount -o remount,ro "$T/cdisk"
		fi
		core >/dev/null
		px_wait_count edge "tunnel up" $((ups + 1)) 15 >/dev/null || true
		if [ "$vol" = 1 ]; then
			{ sleep 1; mount -o remount,rw "$T/cdisk"; } &
			RW=$!
		fi
		kills=$((kills + 1))
		resets=$((resets + $(echo "$out" | grep -c "^stream .* reset" || true)))
		if echo "$out" | grep "^stream" | grep -qv " reset"; then
			echo "round $k (core killed): $(echo "$out" | grep "^stream" | grep -v " reset" | head -3)"
			bad=$((bad + 1))
		fi
	else
		if [ $((k % 3)) = 0 ]; then kill -HUP "${PID[edge]}" "${PID[core]}"; fi
		out=$(many $seed) || true
		echo "$out" | tail -1 | grep -q "^ok" || { echo "round $k: $(echo "$out" | head -3)"; bad=$((bad + 1)); }
	fi
	# the baseline once both stores have filled and evicted (about 10 rounds):
	# descriptors at round 12; the edge's RSS after every round (compared at
	# the end: the largest over the first fifth of the rounds from the 10th,
	# against the smallest of the last 10, which is what stays)
	if [ $k = 12 ]; then fd0="$(fds edge) $(fds core)"; fi
	rssall+=("$(rss edge)")
done
rss0=$(printf '%s\n' "${rssall[@]:9:$((k / 5 + 1))}" | sort -n | tail -1)
rsslast=("${rssall[@]: -10}")
echo "$k rounds in $secs s, $kills with the core killed ($resets transfers reset there)"
if [ "$vol" = 1 ]; then
	wait "$RW" 2>/dev/null || true # the last remount
	sw=$(px_count_log core "opened again")
	[ "$sw" -ge $((kills - 1)) ] && [ "$kills" -gt 0 ] &&
		ok "the core went back from a volatile store to its own $sw times ($kills restarts)" ||
		fail "the core went back to its store $sw times in $kills restarts"
fi
[ $bad = 0 ] && ok "every transfer byte-exact, or reset where the core was killed" || fail "$bad bad rounds of $k"
if [ $k -gt 30 ]; then
	set -- $fd0
	e_fd=$(fds edge) c_fd=$(fds core)
	e_rss=$(printf '%s\n' "${rsslast[@]}" | sort -n | head -1)
	# the core restarts every fifth round: only the edge has a history
	[ "$e_fd" -le $(($1 + 4)) ] && ok "edge descriptors (but store files): $1 -> $e_fd" ||
		fail "edge descriptors (but store files) crept: $1 -> $e_fd"
	# 48M in files of 48M/32: 32 files, and the one being filled
	[ "$(dats edge)" -le 34 ] && ok "edge store files open: $(dats edge)" || fail "edge store files open: $(dats edge)"
	[ "$e_rss" -le $((rss0 * 3 / 2 + 16384)) ] && ok "edge memory: $rss0 KB at most in rounds 10-$((k / 5 + 10)), $e_rss KB at least in the last 10" ||
		fail "edge memory crept: $rss0 KB at most in rounds 10-$((k / 5 + 10)), $e_rss KB at least in the last 10"
	echo "core (restarted since round 12): descriptors (but store files) $2 -> $c_fd, store files $(dats core)"
else
	echo "skip: too short for the descriptor and memory checks (SOAK_SECS)"
fi
px_done
