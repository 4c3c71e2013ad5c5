#!/usr/bin/env bash
# wanopt dre through eviction: two stores of the same size fed the same
# streams (encode into A, decode into B) evict the same chunks, so a long
# series of versions keeps decoding while the stores are full.  Each version is
# an edited copy of one of two bases (random data, zeros, text), so it
# references chunks all over the store, some in the files eviction drops next.
# Small frames keep many store operations in flight on the encoder's helper
# thread: what it has not yet run (and so not yet evicted) must not be
# referenced if the decoder's store will have dropped it by then.  Stores of
# 1 MiB, smaller than what a frame writes, too.  Frames of 64 KiB, 1 and 2 MiB,
# and the command line's default (a 256th of the store: 64 KiB at least).
set -eu
W=${BINDIR:-bin}/wanopt
T=$(mktemp -d /tmp/wanopt-dreevict.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# version i: base i % 2 (about 5 MiB), with up to 200 random 50-byte insertions,
# deletions and overwrites
python3 - "$T" <<'PY'
import random, sys
for i in range(1, 19):
    r = random.Random(i % 2)
    parts, tot = [], 0
    while tot < 5 << 20:
        k, n = r.randrange(4), r.randrange(1000, 200000)
        if k == 0:
            parts.append(bytes(n))
        elif k == 1:
            parts.append(r.randbytes(n))
        else:
            words = [b'alpha', b'beta', b'gamma', b'delta']
            parts.append(b' '.join(r.choice(words + [b'x%d' % r.randrange(1000)]) for _ in range(n // 6)))
        tot += n
    b = bytearray(b''.join(parts))
    e = random.Random(i * 7)
    for _ in range(e.randrange(200)):
        p, k = e.randrange(len(b) - 100), e.randrange(3)
        if k == 0:
            b[p:p] = e.randbytes(50)
        elif k == 1:
            del b[p:p + 50]
        else:
            b[p:p + 20] = e.randbytes(20)
    open(f"{sys.argv[1]}/v{i}", "wb").write(b)
PY
declare -A SENT
for frame in 64K 1M 2M default; do
	rm -rf "$T/A" "$T/B"
	total=0 sent=0 fa="--frame=$frame"
	[ $frame = default ] && fa="--store-size=8M" # the same again: no --frame
	for i in $(seq 1 18); do
		"$W" dre encode --store "$T/A" --store-size 8M "$fa" < "$T/v$i" > "$T/e"
		"$W" dre decode --store "$T/B" --store-size 8M < "$T/e" > "$T/o" 2> "$T/err" ||
			fail "frame $frame: version $i did not decode: $(cat "$T/err")"
		cmp -s "$T/v$i" "$T/o" || fail "frame $frame: version $i decoded to other bytes"
		total=$((total + $(stat -c %s "$T/v$i"))) sent=$((sent + $(stat -c %s "$T/e")))
	done
	oldest=$(ls "$T/A" | grep -m1 '\.dat$')
	echo "frame $frame: 18 versions, $total bytes in, $sent encoded; oldest data file left: $oldest"
	# data files are 1 MiB, 8 of them fit: the first 20 at least are gone
	[ $((16#${oldest%.dat})) -gt 20 ] || fail "frame $frame: oldest file $oldest: the test does not test eviction"
	[ $((sent * 3)) -lt "$total" ] || fail "frame $frame: $sent of $total bytes sent: the versions did not dedupe"
	"$W" dre check --store "$T/B" > /dev/null || fail "frame $frame: the decoder's store is not consistent"
	SENT[$frame]=$sent
done
# without --frame, frames are a 256th of the store at most (64 KiB here): a
# small store loses no more to the eviction horizon than with 64 KiB frames
[ $((SENT[default] * 10)) -le $((SENT[64K] * 11)) ] ||
	fail "default frames on an 8 MiB store: ${SENT[default]} bytes sent, ${SENT[64K]} with 64 KiB frames"
# a store smaller than a frame's writes: even the active file, and what a
# frame has just stored there, may be gone before the decoder reads it.  With
# frames of 64-256 KiB the stores drop their single data file every few
# frames, while each side's helper thread runs the store operations a frame
# or more behind: a chunk stored again while still in the file about to go
# stays there (the encoder must not reference it as just sent), and the
# decoder may look a chunk up in a file its pending operations drop (and then
# store again, after another chunk).  Before both were handled, a series of 6
# versions failed to decode 9-13 times in 20 with 256 KiB frames, 4 in 50
# with 64 KiB frames; the timing varies, hence several series.
for frame in 2M 256K 256K 256K 256K 256K 64K 64K default; do
	rm -rf "$T/A" "$T/B"
	fa="--frame=$frame"
	[ $frame = default ] && fa="--store-size=1M" # 64 KiB frames
	for i in 1 2 3 4 5 6; do
		# a store file errors report here was a read racing the eviction
		# of the file it read (now a plain miss)
		"$W" dre encode --store "$T/A" --store-size 1M "$fa" < "$T/v$i" > "$T/e" 2> "$T/err"
		[ ! -s "$T/err" ] || fail "1 MiB stores, frame $frame: version $i: encode said $(cat "$T/err")"
		"$W" dre decode --store "$T/B" --store-size 1M < "$T/e" > "$T/o" 2> "$T/err" ||
			fail "1 MiB stores, frame $frame: version $i did not decode: $(cat "$T/err")"
		cmp -s "$T/v$i" "$T/o" || fail "1 MiB stores, frame $frame: version $i decoded to other bytes"
	done
done
echo "1 MiB stores: 9 series of 6 versions decoded (frames of 2M, 256K, 64K, default)"
