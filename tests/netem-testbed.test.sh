#!/usr/bin/env bash
# netem/testbed: up and down are idempotent, a profile change rebuilds the link,
# a failed up leaves nothing behind, and bad input is refused clearly.
# Uses its own namespace prefix (wnm-t<pid>-); bounded to about 15 s.
set -u
cd "$(dirname "$0")/.."
export WNM_PREFIX="wnm-t$$-"
export WANEM="${BINDIR:-bin}/wanem"
tb=netem/testbed
fail=0
trap '$tb down >/dev/null 2>&1' EXIT

# expect DESCRIPTION CMD...: the command must succeed.
expect() { local d=$1; shift; if "$@" >/tmp/wnm-tb.$$ 2>&1; then echo "ok    $d"; else echo "FAIL  $d"; sed 's/^/      /' /tmp/wnm-tb.$$; fail=1; fi; }
# refuse DESCRIPTION PATTERN CMD...: the command must fail, printing PATTERN.
refuse() { local d=$1 pat=$2; shift 2; if "$@" >/tmp/wnm-tb.$$ 2>&1 || ! grep -q -- "$pat" /tmp/wnm-tb.$$; then echo "FAIL  $d"; sed 's/^/      /' /tmp/wnm-tb.$$; fail=1; else echo "ok    $d"; fi; }
# nothing_left: no namespace and no state of ours remain.
nothing_left() { ! ip netns list | grep -q "^$WNM_PREFIX" && [ ! -e "/run/wanopt-netem/$WNM_PREFIX" ]; }

expect "down when nothing is up" $tb down
refuse "status when down exits 1" "down" $tb status
expect "up t1" $tb up t1
expect "up t1 again (nothing to do)" sh -c "$tb up t1 | grep -q 'already up'"
expect "status says t1" sh -c "$tb status | grep -q 'up: t1'"
expect "branch reaches datacenter" $tb exec branch $WANEM ping --count=3 --interval=20 --quiet 10.77.0.2
expect "datacenter reaches branch" $tb exec dc $WANEM ping --count=3 --interval=20 --quiet 10.77.0.1
expect "stats are JSON with WAN bytes" sh -c "$tb stats | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"up\"][\"out_bytes\"] > 0'"
expect "up highlat rebuilds" sh -c "$tb up highlat | grep -q 'highlat over'"
expect "status says highlat" sh -c "$tb status | grep -q 'up: highlat'"
expect "RTT is now about 300 ms" sh -c "$tb exec branch $WANEM ping --count=3 --interval=20 --json 10.77.0.2 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert 299 < d[\"min_ms\"] < 303, d'"
expect "down" $tb down
expect "down again" $tb down
expect "nothing left after down" nothing_left
refuse "unknown profile refused" "no profile 'nosuch'" $tb up nosuch
echo "rate = fast" >/tmp/wnm-bad.$$.conf
refuse "bad profile refused with file:line" "wnm-bad.$$.conf:1: bad rate 'fast'" $tb up /tmp/wnm-bad.$$.conf
rm -f /tmp/wnm-bad.$$.conf
expect "nothing left after refusals" nothing_left
if ! netem/netem.sh available; then
	# this kernel has no sch_netem: forcing it makes up fail half-way
	refuse "forced tc netem fails on this kernel" "up failed, cleaned up" env WNM_LINK=netem $tb up t1
	expect "nothing left after a failed up" nothing_left
fi
refuse "bad command shows usage" "usage: netem/testbed up PROFILE" $tb sideways
# the emulator's own options: a bad value is named
refuse "wanem: a bad --seed is named" "wanem: --seed=abc: expected a number" $WANEM run --seed=abc netem/profiles/t1.conf
refuse "wanem: an unwritable --stats is named" "wanem: --stats=/nonexistent/x.json:" $WANEM run --stats=/nonexistent/x.json netem/profiles/t1.conf
refuse "wanem ping: a bad --count is named" "wanem ping: --count=0: expected a number" $WANEM ping --count=0 10.77.0.2
rm -f /tmp/wnm-tb.$$
exit $fail
