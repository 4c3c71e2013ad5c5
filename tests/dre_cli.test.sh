#!/usr/bin/env bash
# wanopt dre on the command line: v1 then v2 in separate runs against the same
# stores reproduce both files byte for byte, v2 costs little, and bad input gets
# a clear message and a non-zero exit, never wrong output.
set -eu
W=${BINDIR:-bin}/wanopt
T=$(mktemp -d /tmp/wanopt-drecli.XXXXXX)
CG=""
trap 'umount "$T/full" 2>/dev/null || true; rm -rf "$T"; [ -z "$CG" ] || rmdir "$CG" 2>/dev/null || true' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# v1: 3 MB of a source tree; v2: the same with 20 insertions
tar -cf - -C / usr/include 2>/dev/null | head -c 3000000 > "$T/v1"
python3 - "$T/v1" "$T/v2" <<'PY'
import random, sys
r = random.Random(5); d = open(sys.argv[1], 'rb').read(); out = []; last = 0
for p in sorted(r.randrange(len(d)) for _ in range(20)):
    out += [d[last:p], bytes(r.randrange(256) for _ in range(50))]; last = p
open(sys.argv[2], 'wb').write(b''.join(out + [d[last:]]))
PY
for v in v1 v2; do
	"$W" dre encode --store "$T/A" < "$T/$v" > "$T/$v.dre"
	"$W" dre decode --store "$T/B" < "$T/$v.dre" > "$T/$v.out"
	cmp -s "$T/$v" "$T/$v.out" || fail "$v did not round-trip"
done
# v2's repeat with runs read each way at each end, whatever this host's
# probe would pick; a value that names no way is said to be ignored
for ways in "window map" "map window"; do
	set -- $ways
	WANOPT_STORE_READS=$1 "$W" dre encode --store "$T/A" < "$T/v2" > "$T/rep.dre"
	WANOPT_STORE_READS=$2 "$W" dre decode --store "$T/B" < "$T/rep.dre" | cmp -s - "$T/v2" ||
		fail "v2's repeat, encoded reading runs by $1, decoded by $2, did not round-trip"
done
WANOPT_STORE_READS=mmap "$W" dre encode --store "$T/A" < "$T/v2" 2> "$T/err" > "$T/rep.dre"
grep -q "WANOPT_STORE_READS=mmap names no way (window or map): ignored" "$T/err" ||
	fail "WANOPT_STORE_READS=mmap: no word that it was ignored: $(cat "$T/err")"
rm -f "$T/rep.dre"
# input from a regular file (mapped, encoded 8 MiB per call: this spans
# eight calls) and from a pipe (read) both round-trip, and a file is encoded
# from the offset stdin is at (here not page-aligned)
python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(3).randbytes(67200000))' > "$T/big"
cat "$T/big" | "$W" dre encode --store "$T/P" > "$T/pipe.dre"
"$W" dre decode --store "$T/Q" < "$T/pipe.dre" | cmp -s - "$T/big" || fail "piped input did not round-trip"
{ dd bs=12345 count=1 of=/dev/null status=none; "$W" dre encode --store "$T/P" > "$T/off.dre"; } < "$T/big"
"$W" dre decode --store "$T/Q" < "$T/off.dre" | cmp -s - <(tail -c +12346 "$T/big") || fail "input from an offset did not round-trip"
[ "$(stat -c %s "$T/off.dre")" -lt 100000 ] || fail "the repeat of piped data was not found in the store"
# output to a regular file: the blocks reserved ahead of the writes (8 MiB
# past them) are given back at the end: the file holds no more than its size,
# rounded to blocks; output appended to a file (not reserved) lands after what
# was there
for f in v1 big; do
	"$W" dre encode --store "$T/R" < "$T/$f" > "$T/res.dre"
	sz=$(stat -c %s "$T/res.dre"); alloc=$(( $(stat -c %b "$T/res.dre") * $(stat -c %B "$T/res.dre") ))
	[ "$alloc" -le $(( sz + 65536 )) ] || fail "output file: $alloc bytes allocated for $sz written"
	"$W" dre decode --store "$T/RB" < "$T/res.dre" | cmp -s - "$T/$f" || fail "output to a file did not round-trip"
done
echo head > "$T/app.dre"
"$W" dre encode --store "$T/R2" < "$T/v1" >> "$T/app.dre"
tail -c +6 "$T/app.dre" | "$W" dre decode --store "$T/RB2" | cmp -s - "$T/v1" || fail "appended output did not round-trip"
rm -rf "$T/res.dre" "$T/R" "$T/RB" "$T/R2" "$T/RB2"
# an input file cut short while being encoded: a clean run over what was
# there (it is read, not mapped), or a clear error; never death by SIGBUS
"$W" dre encode --store "$T/S" < "$T/big" > /dev/null 2> "$T/err" & enc=$!
sleep 0.05; truncate -s 1000000 "$T/big"
set +e; wait $enc; rc=$?; set -e
[ $rc -eq 0 ] || { [ $rc -eq 1 ] && grep -q "a mapped file shrank while being read" "$T/err"; } ||
	fail "input truncated mid-encode: exit $rc: $(cat "$T/err")"
echo "input truncated mid-encode: exit $rc"
rm -f "$T/big" "$T/pipe.dre" "$T/off.dre"
v1=$(stat -c %s "$T/v1.dre"); v2=$(stat -c %s "$T/v2.dre")
echo "v1 encoded to $v1 bytes, v2 after v1 to $v2 bytes"
[ "$v2" -lt 20000 ] || fail "v2 cost $v2 bytes: v1 was not used"
"$W" dre stats --store "$T/A" | grep -q '^chunks' || fail "stats output"
"$W" dre stats --store "$T/A" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["chunks"] > 0 and d["index_bytes"] > 0'
"$W" dre check --store "$T/B" | grep -q consistent || fail "check"
# a flipped byte in a chunk's data in a sealed file: check finds it (the
# record's header is intact); in the active file, the open drops it and says so
"$W" dre encode --store "$T/rot" --store-size 8M < "$T/v1" > /dev/null
cp -a "$T/rot" "$T/rot2"
python3 - "$T/rot/00000001.dat" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(56 + 100); b = f.read(1); f.seek(56 + 100); f.write(bytes([b[0] ^ 1]))
PY
set +e; "$W" dre check --store "$T/rot" > /dev/null 2> "$T/err"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "does not match its checksum and fingerprint (1 chunk so)" "$T/err" || fail "rotten chunk: exit $rc: $(cat "$T/err")"
named=$(grep -o "in [0-9a-f]*\.dat" "$T/err" | cut -c4-)
[ -e "$T/rot/$named" ] || fail "check names $named, which is not in the store"
last=$(ls "$T/rot2"/*.dat | tail -n 1)
python3 - "$last" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(56 + 100); b = f.read(1); f.seek(56 + 100); f.write(bytes([b[0] ^ 1]))
PY
"$W" dre check --store "$T/rot2" | grep -q "were cut at a record that failed its checksum" ||
	fail "rot in the active file not reported: $("$W" dre check --store "$T/rot2")"

expect() {  # status, message substring, command...
	local want=$1 msg=$2; shift 2
	set +e; "$@" > "$T/out" 2> "$T/err"; local rc=$?; set -e
	[ $rc -eq "$want" ] || fail "$* exited $rc, expected $want ($(cat "$T/err"))"
	grep -q -- "$msg" "$T/err" || fail "$*: message lacks '$msg': $(cat "$T/err")"
}
expect 2 "--store DIR is required" "$W" dre encode
expect 2 "unknown action" "$W" dre frobnicate --store "$T/A"
expect 2 "^wanopt dre: unknown action '--store'" "$W" dre --store "$T/A"
# getopt's own messages name the command and the action
expect 2 "^wanopt dre encode: option '--store' requires an argument" "$W" dre encode --store
expect 2 "want auto, zstd, lz4 or none" "$W" dre encode --store "$T/A" --lz gzip
expect 2 "want MIN:AVG:MAX" "$W" dre encode --store "$T/A" --chunks 4096:2048:1000
expect 1 "$T/none" "$W" dre stats --store "$T/none"
# a store that is not one
mkdir "$T/bad"; echo junk > "$T/bad/STORE"
expect 1 "STORE:1: not a wanopt store" "$W" dre encode --store "$T/bad" < "$T/v1"
# a store in use
( exec 9>"$T/B/lock"; flock 9; "$W" dre decode --store "$T/B" < "$T/v1.dre" > /dev/null 2> "$T/err" ) && fail "locked store accepted"
grep -q "in use" "$T/err" || fail "locked store message: $(cat "$T/err")"
# the size limit stays with the store: a later run without --store-size
# neither evicts down to the default nor reports fill against it
"$W" dre encode --store "$T/lim" --store-size 3G < /dev/null > /dev/null
"$W" dre encode --store "$T/lim" < "$T/v1" > /dev/null
grep -qx "size_limit 3221225472" "$T/lim/limit" || fail "limit not kept: $(cat "$T/lim/limit")"
"$W" dre stats --store "$T/lim" | grep -q "of 3221225472 bytes" || fail "stats: $("$W" dre stats --store "$T/lim")"
# sizing: 3 MiB of random data three times through a 2 MiB store hits
# nothing; a store twice the size would have held it (2 of 3 passes hit)
head -c 3000000 /dev/urandom > "$T/r3"
for i in 1 2 3; do "$W" dre encode --store "$T/sz" --store-size 2M < "$T/r3" > /dev/null; done
out=$("$W" dre stats --store "$T/sz")
echo "$out" | grep -q "^hit ratio    0.0 %" && echo "$out" | grep -Eq "^larger store 2x 6[0-9]\.[0-9] %" ||
	fail "sizing: $out"
"$W" dre stats --store "$T/sz" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["new_bytes"] > 8900000 and d["larger_hit_bytes"]["2x"] > 5000000, d' ||
	fail "sizing json"
# a full filesystem under the store: the output is still right, the store
# errors are reported (and fail the run with --sync)
mkdir "$T/full"
if mount -t tmpfs -o size=1m tmpfs "$T/full" 2>/dev/null; then
	set +e; "$W" dre encode --store "$T/full/s" < "$T/v1" > "$T/full.dre" 2> "$T/err"; rc=$?; set -e
	[ $rc -eq 0 ] && grep -q "the last: No space left on device" "$T/err" || fail "full store: exit $rc: $(cat "$T/err")"
	"$W" dre decode --store "$T/fullB" < "$T/full.dre" | cmp -s - "$T/v1" || fail "full store: the stream is wrong"
	rm -rf "$T/full/s"
	set +e; "$W" dre encode --store "$T/full/s" --sync < "$T/v1" > /dev/null 2> "$T/err"; rc=$?; set -e
	[ $rc -eq 1 ] || fail "full store with --sync: exit $rc: $(cat "$T/err")"
	umount "$T/full"
else
	echo "SKIP full-filesystem case: cannot mount a tmpfs (not root?)"
fi
# options that do not apply, and stream headers with unknown flags or a newer version
expect 2 "applies to encode only" "$W" dre decode --store "$T/B" --chunks 2048:4096:16384
expect 2 "want MIN:AVG:MAX" "$W" dre encode --store "$T/B" --chunks 2048:4096:16384junk
expect 2 "not with --lz lz4" "$W" dre encode --store "$T/B" --lz lz4 --level 5
expect 2 "want 1..3" "$W" dre encode --store "$T/B" --format 4
expect 2 "applies to encode only" "$W" dre decode --store "$T/B" --format 2
# --format writes an older stream version, for an older build's decoder
"$W" dre encode --store "$T/F" --format 2 < "$T/v1" > "$T/f2.dre"
[ "$(od -An -tu1 -j4 -N1 "$T/f2.dre" | tr -d ' ')" = 2 ] || fail "--format 2 wrote another version"
"$W" dre decode --store "$T/F2" < "$T/f2.dre" | cmp -s - "$T/v1" || fail "--format 2 stream did not round-trip"
python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[5] = 7; open(sys.argv[2], 'wb').write(b)" \
	"$T/v1.dre" "$T/flags.dre"
expect 1 "corrupt" "$W" dre decode --store "$T/flags" < "$T/flags.dre"
# a stream from a newer build: said so, not "corrupt"
python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[4] = 9; open(sys.argv[2], 'wb').write(b)" \
	"$T/v1.dre" "$T/newer.dre"
expect 1 "newer format version than this build reads (versions 1 to 3)" "$W" dre decode --store "$T/newer" < "$T/newer.dre"
# check neither evicts nor saves a limit; a store from before limits were
# saved (no DIR/limit) opened without a size saves none (and, if it holds more
# than the default, is not evicted down to it)
"$W" dre encode --store "$T/ck" < "$T/v1" > /dev/null
"$W" dre check --store "$T/ck" --store-size 1M > /dev/null
c1=$("$W" dre stats --store "$T/ck" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["data_bytes"])')
[ "$c1" -gt 2000000 ] || fail "check --store-size 1M evicted: $c1 bytes left"
grep -qx "size_limit 1073741824" "$T/ck/limit" || fail "check changed the saved limit: $(cat "$T/ck/limit")"
rm "$T/ck/limit"
"$W" dre encode --store "$T/ck" < /dev/null > /dev/null
[ ! -e "$T/ck/limit" ] || fail "a limit was saved for a store that had none, with no size given"
# a closed stdout or stdin: an error (the store's files must not take their place)
set +e; "$W" dre encode --store "$T/cl" < "$T/v1" >&- 2> "$T/err"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "writing stdout: Bad file descriptor" "$T/err" || fail "closed stdout: exit $rc: $(cat "$T/err")"
[ ! -s "$T/cl/lock" ] || fail "closed stdout: the stream went into the store's lock file"
set +e; "$W" dre encode --store "$T/cl" <&- > "$T/cl.dre" 2> "$T/err"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "reading stdin: Bad file descriptor" "$T/err" || fail "closed stdin: exit $rc: $(cat "$T/err")"
set +e; "$W" dre decode --store "$T/cl2" < "$T/v1.dre" > /dev/full 2> "$T/err"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "writing stdout: No space left on device" "$T/err" || fail "full stdout: exit $rc: $(cat "$T/err")"
# corrupt and truncated streams: an error naming the spot, and only correct bytes out
for cut in 7 1000 50000; do
	head -c $cut "$T/v1.dre" > "$T/cut.dre"
	set +e; "$W" dre decode --store "$T/C$cut" < "$T/cut.dre" > "$T/cut.out" 2> "$T/err"; rc=$?; set -e
	[ $rc -eq 1 ] || fail "truncated at $cut: exit $rc"
	grep -q "wanopt dre decode: input bytes" "$T/err" || fail "truncated: $(cat "$T/err")"
	cmp -s "$T/cut.out" <(head -c "$(stat -c %s "$T/cut.out")" "$T/v1") || fail "truncated at $cut: wrong bytes out"
done
# cut at a frame boundary (no END frame: the encoder's 15-byte last frame, or
# nothing after the header, or nothing at all): an error, not a short success
head -c -15 "$T/v1.dre" > "$T/noend.dre"
head -c 14 "$T/v1.dre" > "$T/hdronly.dre"
: > "$T/empty.dre"
for f in noend hdronly empty; do
	set +e; "$W" dre decode --store "$T/N$f" < "$T/$f.dre" > "$T/cut.out" 2> "$T/err"; rc=$?; set -e
	[ $rc -eq 1 ] && grep -q "ends before the stream's end frame" "$T/err" || fail "$f: exit $rc: $(cat "$T/err")"
	cmp -s "$T/cut.out" <(head -c "$(stat -c %s "$T/cut.out")" "$T/v1") || fail "$f: wrong bytes out"
done
python3 - "$T/v1.dre" "$T/flip.dre" <<'PY'
import sys; d = bytearray(open(sys.argv[1], 'rb').read()); d[len(d) // 2] ^= 0x40
open(sys.argv[2], 'wb').write(d)
PY
set +e; "$W" dre decode --store "$T/D" < "$T/flip.dre" > "$T/flip.out" 2> "$T/err"; rc=$?; set -e
[ $rc -eq 1 ] || fail "flipped bit: exit $rc"
cmp -s "$T/flip.out" <(head -c "$(stat -c %s "$T/flip.out")" "$T/v1") || fail "flipped bit: wrong bytes out"
# a decoder store that lacks what v2 references: a clear miss, no output of wrong bytes
set +e; "$W" dre decode --store "$T/E" < "$T/v2.dre" > "$T/miss.out" 2> "$T/err"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "missing from the store" "$T/err" && grep -q "not in step with the encoder's" "$T/err" ||
	fail "miss: exit $rc: $(cat "$T/err")"
# the README's way back: a copy of the encoder's store, then v2 encoded again
rm -rf "$T/E" && cp -a "$T/A" "$T/E"
"$W" dre encode --store "$T/A" < "$T/v2" > "$T/v2b.dre"
"$W" dre decode --store "$T/E" < "$T/v2b.dre" | cmp -s - "$T/v2" || fail "a copy of the encoder's store did not decode v2"
# A corrupt frame must not leave wrong links behind: after a damaged copy of
# s2 fails to decode into a copy of the decoder store, the real s2 and then
# s3 (which follows s2's order) still decode.  Bytes of s2 are flipped every
# 7 through its first 1000 bytes, every 61 after.
python3 - "$T" "$W" <<'PY' || fail "corrupt frames left a store that cannot go on"
import random, shutil, subprocess, sys
t, w = sys.argv[1], sys.argv[2]
src = open(t + "/v1", "rb").read()[:2000000]
def edit(b, seed):
    r = random.Random(seed); b = bytearray(b)
    for _ in range(50):
        i = r.randrange(len(b)); b[i:i] = bytes(r.randrange(256) for _ in range(20))
    return bytes(b)
s = [src, edit(src, 1)]
s.append(edit(s[1], 2))
def run(mode, store, data, *extra):
    p = subprocess.run([w, "dre", mode, "--store", store] + list(extra), input=data, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode()
# small frames: frames queued behind a failed one must not link either
enc = [run("encode", t + "/LA", v, "--frame", "4096")[1] for v in s]
run("decode", t + "/LB", enc[0])
offs = list(range(14, min(1000, len(enc[1])), 7)) + list(range(1000, len(enc[1]), 61))
tried = broken = 0
for off in offs:
    bad = bytearray(enc[1]); bad[off] ^= 0x10
    shutil.rmtree(t + "/LS", ignore_errors=True); shutil.copytree(t + "/LB", t + "/LS")
    if run("decode", t + "/LS", bytes(bad))[0] == 0:
        continue
    tried += 1
    for k in (1, 2):
        rc, out, err = run("decode", t + "/LS", enc[k])
        if rc or out != s[k]:
            print("FAIL: s%d after a bad s2 (byte %d): %s" % (k + 1, off, err.strip()))
            broken += 1
            break
print("corrupt frames: %d damaged streams refused, %d left the store unable to go on" % (tried, broken))
sys.exit(1 if broken or not tried else 0)
PY
# zstd's worker threads refused (a pids limit that leaves room for the
# encoder's own five threads only): the residual is coded on the encoder's
# thread instead, and the run works as before
for d in /sys/fs/cgroup/pids /sys/fs/cgroup; do
	[ -e "$d/cgroup.procs" ] && mkdir "$d/wanopt-test.$$" 2>/dev/null || continue
	CG="$d/wanopt-test.$$" # the kernel made its files, pids.max among them if it limits pids there
	[ -e "$CG/pids.max" ] && echo 5 > "$CG/pids.max" 2>/dev/null && break
	rmdir "$CG"
	CG=""
done
if [ -n "$CG" ]; then
	sh -c 'echo $$ > "$1/cgroup.procs" && exec "$2" dre encode --store "$3" < "$4" > "$5"' sh \
		"$CG" "$W" "$T/N" "$T/v1" "$T/n.dre" 2>"$T/n.err" || fail "encode with 5 threads allowed: $(cat "$T/n.err")"
	"$W" dre decode --store "$T/NB" < "$T/n.dre" | cmp -s - "$T/v1" || fail "encode with 5 threads allowed did not round-trip"
else
	echo "zstd's workers refused: not checked (no pids cgroup to limit threads with)"
fi
echo "dre CLI: round trips, errors and corrupt input OK"
