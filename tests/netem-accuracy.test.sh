#!/usr/bin/env bash
# Emulator accuracy (issue 3): real TUN devices, real kernel TCP on both sides.
#
#   wnm-t<pid>-a (branch)                    wnm-t<pid>-b (datacenter)
#   wnm0 10.77.0.1/24 ==== bin/wanem ======= wnm0 10.77.0.2/24
#
# 1. RTT: median ICMP echo RTT within 1 ms of the profile RTT plus serialisation.
# 2. IP throughput within 2 % of the configured rate, and TCP goodput within 5 % of
#    what TCP payload can fill at that rate, on a long transfer (t1, 20 Mbit/s).
# 3. Loss: measured loss within the 99.9 % binomial interval of the configured loss.
# Bounded to about 30 s.
set -eu
cd "$(dirname "$0")/.."
. tests/netem/lib.sh
trap wn_cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "needs root"; exit 1; }

# rtt_test PROFILE: 100 echo requests of 56 bytes (84-byte IP packets), 10 ms apart.
rtt_test() {
	local prof=$1 p expect r
	p=$("$WN_BIN" check "$prof")
	eval "$p"
	# profile RTT + serialisation of the 84-byte request (up) and reply (down)
	expect=$(python3 -c "print(round($rtt_us/1000 + 84*8*1000/$up_rate_bit + 84*8*1000/$down_rate_bit, 4))")
	wn_start "$prof"
	r=$(in_a "$WN_BIN" ping --count=100 --interval=10 --json 10.77.0.2)
	wn_stop
	echo "      $name: expect $expect ms, measured $r"
	check "rtt-$name" "abs($(jget "$r" median_ms) - $expect) <= 1.0 and $(jget "$r" received) == 100" \
		"median RTT $(jget "$r" median_ms) ms vs $expect ms (min $(jget "$r" min_ms), max $(jget "$r" max_ms))"
}

# sleep_until T0 OFFSET: sleeps until OFFSET seconds (an expression) after
# the $EPOCHREALTIME value T0.
sleep_until() {
	sleep "$(python3 -c "import time; print(max(0, $1 + $2 - time.time()))")"
}

# steal_ms: the processors' steal time so far (the VM's host ran something
# else), ms summed over processors.
steal_ms() { awk '/^cpu / {print $9 * 10}' /proc/stat; }

# goodput_run PROFILE SECONDS WINDOW: one measured transfer; sets r (the
# client's figures), ip_bps, drops, held, late (wanem's delivery timer at
# its latest, us) and steal (ms of the measured window).  The endpoints run
# at nice -10: the test measures the emulator, not how long a busy host
# leaves a reader unscheduled.
goodput_run() {
	local prof=$1 secs=$2 win=$3 s0 s1 gpid t0 st0
	wn_start "$prof"
	in_b nice -n -10 "$WN_BIN" serve --listen=10.77.0.2:5001 --send-zero=10000000000 --once &
	sleep 0.3
	t0=$EPOCHREALTIME
	in_a nice -n -10 "$WN_BIN" get --connect=10.77.0.2:5001 --recv=/dev/null --max-time="$secs" \
		--steady-after=1.5 --window="$win" >"$WN_TMP/get.json" &
	gpid=$!
	sleep_until "$t0" 1.5
	s0=$(wn_stats) st0=$(steal_ms)
	sleep_until "$t0" "$secs - 0.5"
	s1=$(wn_stats) steal=$(($(steal_ms) - st0))
	wait "$gpid" || true
	r=$(cat "$WN_TMP/get.json")
	wn_stop
	ip_bps=$(python3 -c "print(($(jget "$s1" down.out_bytes) - $(jget "$s0" down.out_bytes))*8/($(jget "$s1" uptime_s) - $(jget "$s0" uptime_s)))")
	drops=$(jget "$s1" down.drop_queue) held=$(jget "$s1" down.held) late=$(jget "$s1" late_max_us)
	echo "      $name (window $([ "$win" = 0 ] && echo default || echo "$win")): $r; IP throughput from 1.5 s to $secs - 0.5 s: $ip_bps bit/s; $drops queue drops; wanem's timer at most $late us late, steal $steal ms"
}

# goodput_test PROFILE SECONDS [WINDOW]: one TCP download for SECONDS.  The
# link's IP throughput, counted by wanem between two snapshots taken while the
# transfer runs (at 1.5 s, after slow start, and 0.5 s before its end, timed by
# wanem's own clock), must be within 2 % of the configured rate.  (Counted over
# the whole transfer, the handshake and slow start cost the fast link 1-2 points
# and the test failed now and then at 97.6 %.)  TCP goodput, measured from 1.5 s
# on, payload bytes only, must be within 5 % of what TCP can carry at that rate:
# 1448 of every 1500 bytes (TCP/IP headers with timestamps take 52), 96.5 % of
# the rate.  (Measured against the raw rate, the headers alone took 3.5 of the 5
# points, and one retransmission timeout in the 7 s, 2.9 more: the test failed
# about one run in five.)  WINDOW clamps the receiver's window to 1.8 BDP:
# CUBIC's window then stays small and steady, so its sawtooth (deep on a T1,
# whose 1-BDP queue is 5 packets) never drains the queue and the figure is the
# emulator's rate.  The few queue drops left do not idle the link.  (The
# 20 Mbit/s link gets the same clamp: see its call below.)  A run out of
# bounds while the host held the emulator (its SCHED_FIFO timer 50 ms or more
# late) or took the VM's processors away (steal of 2 % of the measured
# processor time or more) measured the host, not the emulator: it is printed,
# and the transfer runs once more, to the same bounds.
goodput_test() {
	local prof=$1 secs=$2 win=${3:-0} r ip_bps drops held late steal tcp_max
	eval "$("$WN_BIN" check "$prof")"
	# the emulator's rate is IP bytes: TCP can carry at most its payload share
	tcp_max=$(python3 -c "print(round($down_rate_bit * ($mtu - 52) / $mtu))")
	# the two bounds, on the last run's figures (Python expressions)
	rate_bound() { echo "abs($ip_bps / $down_rate_bit - 1) <= 0.02"; }
	goodput_bound() { echo "abs($(jget "$r" steady_bps) / $tcp_max - 1) <= 0.05"; }
	goodput_run "$prof" "$secs" "$win"
	if ! python3 -c "import sys; sys.exit(0 if ($(rate_bound)) and ($(goodput_bound)) else 1)" &&
		{ [ "$late" -ge 50000 ] || [ "$steal" -ge $(( (secs * 1000 - 2000) * $(nproc) / 50 )) ]; }; then
		echo "      (out of bounds while the host held the run: measured once more)"
		goodput_run "$prof" "$secs" "$win"
	fi
	# the transfer must still run at the second snapshot (it ran to its time
	# limit: complete false).  Packets held on the link at that instant were
	# asked for too, until one run in CI found none (99.88 % of the rate,
	# CUBIC's default window between two sawtooth teeth): informative only.
	check "rate-$name" "$(rate_bound) and not $(jget "$r" complete)" \
		"IP throughput $(python3 -c "print(round(100*$ip_bps/$down_rate_bit,2))") % of $down_rate_bit bit/s, $held packets on the link at the end"
	check "goodput-$name" "$(goodput_bound)" \
		"TCP goodput $(jget "$r" steady_bps) bit/s = $(python3 -c "print(round(100*$(jget "$r" steady_bps)/$tcp_max,2))") % of the $tcp_max bit/s TCP payload can fill at $down_rate_bit bit/s"
}

# loss_test: 3000 echo requests 1 ms apart over a link losing 5 % upstream.
loss_test() {
	local prof=tests/netem/loss.conf r s n lost p=0.05
	wn_start "$prof" --seed=12345
	r=$(in_a "$WN_BIN" ping --count=3000 --interval=1 --wait=1 --json 10.77.0.2)
	s=$(wn_stats)
	wn_stop
	n=$(jget "$r" sent)
	lost=$(( n - $(jget "$r" received) ))
	echo "      sent $n, lost $lost; wanem: $(jget "$s" up.drop_loss) of $(jget "$s" up.in_pkts) dropped"
	check "no-queue-drops" "$(jget "$s" up.drop_queue) + $(jget "$s" down.drop_queue) == 0" \
		"the loss test's queue never overflowed"
	check "loss" "abs($lost - $n*$p) <= 3.29*($n*$p*(1-$p))**0.5" \
		"lost $lost of $n = $(python3 -c "print(round(100*$lost/$n,3))") %, 99.9 % interval for 5 %: $(python3 -c "
n=$n;p=$p;import math;d=3.29*math.sqrt(n*p*(1-p));print(f'{n*p-d:.0f}..{n*p+d:.0f}')")"
}

rtt_test netem/profiles/t1.conf
rtt_test tests/netem/fast.conf
goodput_test netem/profiles/t1.conf 7 13900     # 1.8 x 7720 bytes
# 1.8 x 50000 bytes, as on the T1.  With the default window CUBIC overflowed
# the 2-BDP queue (20-25 drops a run), and in 2 CI runs of about 12 the link
# sat idle about 0.4 s of the 4 measured (89.2 and 90.9 % of the rate), as a
# retransmission timeout idles it; not reproduced here, under two busy loops
# or heavy writeback.  Clamped: no drops, 99.95-100.0 % (3 runs).  A third
# CI run, clamped, found 76.6 % with no drops: the signature of the emulator
# held about a second (a local run with wanem stopped 1 s: 75.4 %, its timer
# 1,002 ms late), which goodput_test now tells from the emulator's own rate
goodput_test tests/netem/fast.conf 6 90000
loss_test
exit $WN_FAIL
