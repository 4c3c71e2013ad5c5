#!/usr/bin/env bash
# proxy_store.test.sh: the segment stores across restarts, wipes and warming.
#
#   client --> edge 127.0.0.1:L ==TLS==> core 127.0.0.1:P --> server 127.0.0.1:SRV
#
# 1. The stores survive a restart: after both daemons restart, a transfer seen
#    before is still hot.
# 2. Wiped edge store: the edge is stopped, its store directory deleted, and
#    the edge restarted; the core still believes the data is there, so its
#    references miss at the edge: the ask/learn exchange must deliver the
#    right bytes without resetting the stream.  Same for a wiped core store
#    and an upload.
# 3. warm: `wanopt warm` of a file at the core pushes its chunks into the
#    edge's store, so the first download of that data crosses few WAN bytes;
#    and the other way round (warm at the edge, then upload).  A push cut off
#    by the edge's death, or with no edge, fails promptly.
# 4. A second branch (edge2, 3 tunnel connections) fetching what the first
#    holds, both fetching new data at once, and concurrent streams: exact.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup

P=$(px_port) S1=$(px_port) S2=$(px_port) L=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
core() { px_core core "$P" "$S1" --allow=127.0.0.0/8 --log_level=debug; }
edge() { px_edge edge "$P" "$S2" "--forward=127.0.0.1:$L -> 127.0.0.1:$SRV"; }
core
edge

MB=$((1 << 20))
size=$((12 * MB))
# wan_in of the edge moved by a download (stdout: the byte count).
dl_wan() {  # seed size
	local w0 w1 out
	w0=$(px_stat "$S2" 'j["total"]["wan_in"]')
	out=$(pxt get 127.0.0.1 "$L" "$1" "$2") || { echo "$out" >&2; echo -1; return; }
	w1=$(px_stat "$S2" 'j["total"]["wan_in"]')
	echo $((w1 - w0))
}
ul_wan() {  # seed size
	local w0 w1 out
	w0=$(px_stat "$S2" 'j["total"]["wan_out"]')
	out=$(pxt put 127.0.0.1 "$L" "$1" "$2") || { echo "$out" >&2; echo -1; return; }
	w1=$(px_stat "$S2" 'j["total"]["wan_out"]')
	echo $((w1 - w0))
}
# check_wan WHAT BYTES MAX: a transfer was byte-exact and crossed at most MAX.
check_wan() {
	if [ "$2" -lt 0 ]; then fail "$1: transfer failed"
	elif [ "$2" -le "$3" ]; then ok "$1: $2 WAN bytes (at most $3)"
	else fail "$1: $2 WAN bytes, expected at most $3"; fi
}
check_cold() {
	if [ "$2" -lt 0 ]; then fail "$1: transfer failed"
	elif [ "$2" -ge "$3" ]; then ok "$1: $2 WAN bytes (cold, at least $3)"
	else fail "$1: only $2 WAN bytes: the data was not cold (expected at least $3)"; fi
}

# ---- 1. restart keeps the stores ----
check_cold "first download" "$(dl_wan 1 $size)" $((size / 4))
check_cold "first upload" "$(ul_wan 2 $size)" $((size / 4))
px_stop edge
px_stop core
core
edge
check_wan "download after both restarted" "$(dl_wan 1 $size)" $((size / 100))
check_wan "upload after both restarted" "$(ul_wan 2 $size)" $((size / 100))

# ---- 2. wiped stores: ask/learn ----
px_stop edge
rm -rf "$T/edge.store"
edge
asks0=$(px_stat "$S2" 'j["total"]["asks"]')
w=$(dl_wan 1 $size)
asks1=$(px_stat "$S2" 'j["total"]["asks"]')
if [ "$w" -ge 0 ]; then ok "download after the edge store was wiped: byte-exact, $w WAN bytes, $((asks1 - asks0)) asks"
else fail "download after the edge store was wiped"; fi
[ $((asks1 - asks0)) -gt 0 ] && ok "the edge asked for what it lacked" ||
	echo "note: no asks (the core knew the edge's store was new)"
# The data is in the new edge store now, but the chunk successor links the
# edge formed while recovering differ from the core's, so RUNs keep missing
# (each miss costs an ask and a LEARN of the frame): far from cold, not hot.
a0=$(px_stat "$S2" 'j["total"]["asks"]')
check_wan "download again after the wipe" "$(dl_wan 1 $size)" $((size / 4))
echo "     ($(( $(px_stat "$S2" 'j["total"]["asks"]') - a0 )) asks)"
# The wiped store came back under a new id: the core tracks two peer stores,
# and every stream gave its peer slot back when it closed (the gauges follow
# within a tick).
pk=$(px_stat_wait "$S1" '"%d %d" % (j["store"]["peers"], j["store"]["peers_held"])' "2 0")
[ "$pk" = "2 0" ] && ok "the core tracks both edge stores, no slot held after the streams closed" ||
	fail "core peer slots (tracked, held): $pk, expected 2 0"

ups=$(px_count_log edge "tunnel up")
px_stop core
rm -rf "$T/core.store"
core
px_wait_count edge "tunnel up" $((ups + 1)) 15 || fail "the edge did not reconnect to the restarted core"
casks0=$(px_stat "$S1" 'j["total"]["asks"]')
w=$(ul_wan 2 $size)
casks1=$(px_stat "$S1" 'j["total"]["asks"]')
if [ "$w" -ge 0 ]; then ok "upload after the core store was wiped: byte-exact, $w WAN bytes, $((casks1 - casks0)) asks"
else fail "upload after the core store was wiped"; fi
n=$(px_resets edge core)
[ "$n" -eq 0 ] && ok "no stream was reset" || fail "$n stream resets logged"

# ---- 3. warm ----
pxt gen 10 $size "$T/warm-down.bin"
tot() { px_stat "$1" "[j['total'][k] for k in ('lan_in', 'lan_out', 'wan_in', 'wan_out', 'warm_file_bytes', 'warm_wan_bytes')]"; }
c0=$(tot "$S1") e0=$(tot "$S2")
out=$(timeout 60 "$BIN" warm --stats=127.0.0.1:"$S1" --timeout=50 "$T/warm-down.bin" 2>&1) &&
	ok "warm at the core: $out" || fail "warm at the core: $out"
# a push is not client traffic: it has totals of its own
c1=$(tot "$S1") e1=$(tot "$S2")
python3 - "$c0" "$c1" "$e0" "$e1" $size <<'PY' && ok "the warm counted as pre-positioning, not LAN or WAN traffic" || fail "warm totals: core $c0 -> $c1, edge $e0 -> $e1"
import ast, sys
c0, c1, e0, e1 = (ast.literal_eval(a) for a in sys.argv[1:5])
size = int(sys.argv[5])
assert c1[:4] == c0[:4] and e1[:4] == e0[:4], "LAN/WAN totals moved"
assert c1[4] - c0[4] == size and e1[4] == e0[4], "file bytes"
assert 0 < c1[5] - c0[5] and 0 < e1[5] - e0[5], "warm WAN bytes"
PY
check_wan "first download of data warmed at the core" "$(dl_wan 10 $size)" $((size / 50))
check_cold "control: first download of data not warmed" "$(dl_wan 11 $size)" $((size / 4))

pxt gen 12 $size "$T/warm-up.bin"
out=$(timeout 60 "$BIN" warm --stats=127.0.0.1:"$S2" --timeout=50 "$T/warm-up.bin" 2>&1) &&
	ok "warm at the edge: $out" || fail "warm at the edge: $out"
check_wan "first upload of data warmed at the edge" "$(ul_wan 12 $size)" $((size / 50))

# A large file is streamed with bounded memory (it was once read whole into
# the relay's input); a device or a directory is refused, not read forever.
truncate -s 512M "$T/warm-sparse.bin"
peak=0
timeout 60 "$BIN" warm --stats=127.0.0.1:"$S1" --timeout=50 "$T/warm-sparse.bin" >"$T/warm-sparse.out" 2>&1 &
wpid=$!
while kill -0 $wpid 2>/dev/null; do
	r=$(awk '/RssAnon/ {print int($2 / 1024)}' "/proc/${PID[core]}/status")
	[ "$r" -gt "$peak" ] && peak=$r
	sleep 0.05
done
wait $wpid && ok "warm of a 512 MiB file: $(cat "$T/warm-sparse.out")" || fail "warm of a 512 MiB file: $(cat "$T/warm-sparse.out")"
# (AddressSanitizer keeps up to 256 MiB of freed memory in quarantine)
lim=160
grep -q __asan_init "$BIN" && lim=440
[ "$peak" -lt $lim ] && ok "the core's anonymous memory stayed at ${peak} MiB or less during it (bound $lim)" ||
	fail "the core's anonymous memory reached ${peak} MiB warming a 512 MiB file (bound $lim)"
rm -f "$T/warm-sparse.bin"
for bad in /dev/zero "$T"; do
	out=$(timeout 20 "$BIN" warm --stats=127.0.0.1:"$S1" --timeout=10 "$bad" 2>&1) &&
		fail "warm of $bad succeeded: $out" || {
		case "$out" in
		*"\"errors\":[\"$bad: not a regular file\"]"*) ok "warm of $bad fails, saying why: $out" ;;
		*) fail "warm of $bad fails without saying why: $out" ;;
		esac
	}
done
px_wait_log core "warm: /dev/zero: not a regular file" 5 && ok "the core logged why" || fail "no log line for /dev/zero"
# the request's last path needs no newline (the CLI sends one; a script may not)
out=$(timeout 20 python3 - "$S1" "$T/warm-down.bin" <<'PY' 2>&1
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=15)
c.request("POST", "/warm", body=sys.argv[2].encode())
r = c.getresponse()
print(r.status, r.getheader("Content-Type"), r.read().decode().strip())
for path in ("/metrics", "/stats.json"):  # what serves /warm takes POST; these still do not
    c.request("POST", path, body=b"x")
    r = c.getresponse()
    r.read()
    print(path, r.status, end="; ")
PY
)
case "$out" in 200" application/json "*'"streams":1,"failed":0'*"/metrics 405; /stats.json 405; "*)
	ok "a POST whose last path has no newline, and POSTs elsewhere: $out" ;;
*) fail "a POST whose last path has no newline, and POSTs elsewhere: $out" ;; esac

# A push cut off by the peer's death must fail promptly, not hang.
pxt gen 13 $((150 * MB)) "$T/warm-big.bin"
timeout 60 "$BIN" warm --stats=127.0.0.1:"$S1" --timeout=50 "$T/warm-big.bin" >"$T/warm-big.out" 2>&1 &
wpid=$!
PID[warmcli]=$wpid
px_wait_log core "warm: pushing $T/warm-big.bin" 10
kill -KILL "${PID[edge]}"
t0=$(date +%s)
rc=0
for i in $(seq 100); do kill -0 $wpid 2>/dev/null || break; sleep 0.1; done
wait $wpid || rc=$?
dt=$(( $(date +%s) - t0 ))
if [ $rc -ne 0 ] && [ $dt -le 5 ]; then ok "warm cut off by the edge's death fails in ${dt}s: $(tr '\n' ' ' <"$T/warm-big.out")"
else fail "warm cut off by the edge's death: exit $rc after ${dt}s: $(cat "$T/warm-big.out")"; fi
unset "PID[edge]" "PID[warmcli]"
out=$(timeout 20 "$BIN" warm --stats=127.0.0.1:"$S1" --timeout=10 "$T/warm-down.bin" 2>&1) &&
	fail "warm with no edge connected succeeded: $out" || {
	case "$out" in
	*"no peer: the tunnel is down"*) ok "warm with no edge connected fails, saying why: $out" ;;
	*) fail "warm with no edge connected fails without saying why: $out" ;;
	esac
}
edge

# ---- 4. a second branch ----
# A second edge (3 parallel tunnel connections) fetches data the first one
# already holds: the core's store has it, the second edge's does not.  The
# bytes must be exact and nothing reset; the cost is printed (the core does
# not track what each edge holds, so it sends references the new edge asks
# back for: about a cold transfer plus one ask per frame).
S3=$(px_port) L2=$(px_port)
rs0=$(px_resets edge edge2 core)
# (its 20 Mbit/s link: the core codes its downloads on coder threads, zstd 9)
px_edge edge2 "$P" "$S3" "--forward=127.0.0.1:$L2 -> 127.0.0.1:$SRV" --tunnels=3 --link_rate=20M
px_wait_count edge2 "tunnel up" 3 15
e2() {  # seed size: prints "WAN-bytes asks" of a download through edge2
	local w0 a0 out
	w0=$(px_stat "$S3" 'j["total"]["wan_in"]') a0=$(px_stat "$S3" 'j["total"]["asks"]')
	out=$(pxt get 127.0.0.1 "$L2" "$1" "$2") || { echo "$out" >&2; echo "-1 0"; return; }
	echo "$(( $(px_stat "$S3" 'j["total"]["wan_in"]') - w0 )) $(( $(px_stat "$S3" 'j["total"]["asks"]') - a0 ))"
}
check_cold "first branch fetches new data" "$(dl_wan 32 $size)" $((size / 4))
set -- $(e2 32 $size)
[ "$1" -ge 0 ] && ok "second branch, data the first holds: byte-exact; $1 WAN bytes, $2 asks" ||
	fail "second branch, data the first holds"
set -- $(e2 32 $size)
[ "$1" -ge 0 ] && [ "$1" -le $((size / 4)) ] && ok "second branch, again: $1 WAN bytes, $2 asks" ||
	fail "second branch, again: $1 WAN bytes (expected at most $((size / 4)))"
# both branches at once, data new to both
px_bg b1 get 127.0.0.1 "$L" 30 $size --timeout=60
px_bg b2 get 127.0.0.1 "$L2" 30 $size --timeout=60
px_bg_wait b1 60; r1="$BG_RC $BG_OUT"
px_bg_wait b2 60; r2="$BG_RC $BG_OUT"
case "$r1/$r2" in "0 ok"*"/0 ok"*) ok "both branches fetch the same new data at once: byte-exact" ;;
*) fail "both branches at once: $r1 / $r2" ;; esac
expect "second branch: 40 concurrent streams" pxt many 127.0.0.1 "$L2" 40 31 --sizes=1000,100000,2000000
n=$(( $(px_resets edge edge2 core) - rs0 ))
[ "$n" -eq 0 ] && ok "no stream reset with two branches" || fail "$n stream resets logged"
grep -q "bulk coded on the coder thread (zstd 9)" "$T/core.log" &&
	ok "the core coded edge2's downloads on coder threads" ||
	fail "the core coded none of edge2's downloads on a coder thread"

# ---- 5. a core whose store filesystem is full ----
# Its writes fail, so chunks it sent (the edge believes it holds them) are not
# on its disk: an upload of that data must still arrive exact, through
# ask/learn, with the reason logged.
P3=$(px_port) S4=$(px_port) S5=$(px_port) L3=$(px_port)
if px_tmpfs "$T/tiny" 8m; then
	px_run core3 core --listen=127.0.0.1:"$P3" --store="$T/tiny/st" --store_size=100M --tls_cert="$T/pki/core.crt" \
		--tls_key="$T/pki/core.key" --tls_ca="$T/pki/ca.crt" --stats=127.0.0.1:"$S4" --allow=127.0.0.0/8
	px_wait_log core3 "tunnel listener on" 10
	# (a 20 Mbit/s link: the edge codes its uploads on its coder thread, so
	# the core's asks may come while a job codes)
	px_edge edge3 "$P3" "$S5" "--forward=127.0.0.1:$L3 -> 127.0.0.1:$SRV" --link_rate=20M --log_level=debug
	expect "full core store: download 12 MiB" pxt get 127.0.0.1 "$L3" 50 $size
	expect "full core store: download another 12 MiB" pxt get 127.0.0.1 "$L3" 51 $size
	expect "full core store: upload the first back" pxt put 127.0.0.1 "$L3" 50 $size
	expect "full core store: and again" pxt put 127.0.0.1 "$L3" 51 $size
	px_wait_log core3 "No space left on device" 15 && ok "the core logs why: $(grep -m1 "No space left" "$T/core3.log" | cut -c26-)" ||
		fail "the core did not log the full disk"
	px_alive core3 && ok "the core with a full store is alive" || fail "the core with a full store died"
	echo "     edge3: $(grep -c "resent frame" "$T/edge3.log") frames resent, $(grep -c "coding job taken back" "$T/edge3.log") of them after taking a coding job back"
	px_stop core3 >/dev/null; px_stop edge3 >/dev/null
	umount "$T/tiny" 2>/dev/null || true
else
	ok "SKIP full-store case: cannot mount a tmpfs"
fi

out=$(timeout 20 "$BIN" warm --stats=127.0.0.1:"$S1" --timeout=10 "$T/no-such-file" 2>&1) &&
	fail "warm of a missing file succeeded: $out" || {
	case "$out" in  # the error alone, no usage text after it
	"wanopt warm: $T/no-such-file: No such file or directory") ok "warm of a missing file fails: $out" ;;
	*) fail "warm of a missing file: $out" ;;
	esac
}
px_alive core && px_alive edge && ok "both daemons alive" || fail "a daemon died"
px_done
