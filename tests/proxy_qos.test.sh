#!/usr/bin/env bash
# proxy_qos.test.sh: DiffServ classes through an edge/core pair (`dscp`,
# `dscp_tunnels`), on the loopback of a network namespace of the test's own,
# where nftables counters see every packet with its class.
# 1. An edge with dscp = af11 and dscp_tunnels = ef, af41 opens three tunnel
#    connections, marked af11, ef and af41; the core answers each in its class,
#    its SYN-ACK too with net.ipv4.tcp_reflect_tos = 1 (as conf/README says).
# 2. A client marking ef (then af41): its bytes cross in that class's tunnel
#    connection, both ways; the core's connection to the server and the edge's
#    packets to the client carry the class too.  Byte-exact.
# 3. An unmarked client, and one in a class with no tunnel of its own (cs1),
#    ride the main connection (af11); each keeps its own class on the LAN
#    legs: the cs1 client's answers and the core's packets to the server stay
#    cs1 (the class rides in OPEN), the unmarked client's stay unmarked.
# 4. classify (edge.conf: af41 for a second server's port): an unmarked
#    client to it rides af41's tunnel connection both ways, and its LAN legs
#    carry af41 (both ends' open lines and stats name it); an ef client to it
#    keeps ef.  After SIGHUP with the rule
#    changed to cs1: the main connection, cs1 on the LAN legs.
# 5. fail_open = direct with the core stopped: an ef client goes direct, and
#    that connection to the server carries ef; so does an unmarked client to
#    the classified port, in its class (cs1).
# 6. A bad class in the configuration: file:line and exit status 2.
set -eu
cd "$(dirname "$0")/.."
if [ -z "${QOS_NS:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 0; }
	command -v nft >/dev/null || { echo "SKIP: no nft"; exit 0; }
	NS=wqos-$$
	ip netns add "$NS"
	trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
	ip -n "$NS" link set lo up
	rc=0
	QOS_NS=$NS timeout -k 5 120 ip netns exec "$NS" bash "$0" || rc=$?
	exit $rc
fi
. tests/proxy/lib.sh
px_setup

px_server srv
px_server srv2
SP=$(cat "$T/srv.port") SP2=$(cat "$T/srv2.port")
CP=$(px_port) FP=$(px_port) FP2=$(px_port) HC=$(px_port) HE=$(px_port)
CLASSES="af11 ef af41 cs1"

# Counters: tun_out_C (edge -> core), tun_back_C (core -> edge), srv_C (to the
# server), cli_C (edge -> client), for each class C, on the output hook (every
# packet here leaves through lo).
{
	echo "table inet wqos {"
	for c in $CLASSES; do
		for k in tun_out tun_back srv cli synack; do echo "  counter ${k}_$c { }"; done
	done
	echo "  chain out {"
	echo "    type filter hook output priority 0; policy accept;"
	for c in $CLASSES; do
		echo "    tcp dport $CP ip dscp $c counter name tun_out_$c"
		echo "    tcp sport $CP ip dscp $c counter name tun_back_$c"
		echo "    tcp dport { $SP, $SP2 } ip dscp $c counter name srv_$c"
		echo "    tcp sport { $FP, $FP2 } ip dscp $c counter name cli_$c"
		echo "    tcp sport $CP tcp flags & (syn | ack) == syn | ack ip dscp $c counter name synack_$c"
	done
	echo "  }"
	echo "}"
} | nft -f -
# cnt NAME packets|bytes
cnt() { nft list counter inet wqos "$1" | sed -n "s/.*packets \([0-9]*\) bytes \([0-9]*\).*/\1 \2/p" |
	{ read -r p b; [ "$2" = packets ] && echo "$p" || echo "$b"; }; }
# snap: every counter's bytes into SNAP[name]; delta NAME: bytes since the snap
declare -A SNAP=()
snap() {
	local c k
	for c in $CLASSES; do for k in tun_out tun_back srv cli; do SNAP[${k}_$c]=$(cnt "${k}_$c" bytes); done; done
}
delta() { echo $(($(cnt "$1" bytes) - ${SNAP[$1]})); }

REFLECT=0 # this namespace's own setting; the host's is untouched
sysctl -qw net.ipv4.tcp_reflect_tos=1 2>/dev/null && REFLECT=1
px_core core "$CP" "$HC" --allow=127.0.0.0/8
# classify only in the file, so that a reload can change it
echo "classify = af41 127.0.0.1:$SP2" >"$T/edge.conf"
px_edge edge "$CP" "$HE" -c "$T/edge.conf" --forward="127.0.0.1:$FP -> 127.0.0.1:$SP" \
	--forward="127.0.0.1:$FP2 -> 127.0.0.1:$SP2" --dscp=af11 --dscp_tunnels="ef, af41" --fail_open=direct
px_wait_count edge "tunnel up" 3 15

echo "== 1. three tunnel connections, each in its class both ways"
grep -q "tunnel up: .*(class ef)" "$T/edge.log" && grep -q "tunnel up: .*(class af41)" "$T/edge.log" &&
	ok "edge log names the class lanes" || fail "edge log: $(grep 'tunnel up' "$T/edge.log")"
sleep 1 # keepalives cross every lane
for c in af11 ef af41; do
	o=$(cnt tun_out_$c packets) b=$(cnt tun_back_$c packets)
	[ "$o" -gt 3 ] && [ "$b" -gt 3 ] && ok "$c: $o packets to the core, $b back" ||
		fail "$c: $o packets to the core, $b back"
done
[ "$(cnt tun_out_cs1 packets)" = 0 ] && ok "no cs1 tunnel" || fail "cs1 packets on the tunnel port"
if [ $REFLECT = 1 ]; then
	for c in af11 ef af41; do
		[ "$(cnt synack_$c packets)" -ge 1 ] && ok "$c: the core's SYN-ACK in $c (tcp_reflect_tos)" ||
			fail "$c: no SYN-ACK in $c"
	done
else
	echo "skip: no net.ipv4.tcp_reflect_tos here (SYN-ACK classes)"
fi
# both ends list each tunnel connection with its class
classes() { px_stat "$1" '" ".join(sorted(p["peer"].split(" class ")[1] for p in j["tunnel"]["peers"] if " class " in p["peer"]))'; }
for side in "edge $HE" "core $HC"; do
	set -- $side
	got=$(classes "$2")
	[ "$got" = "af11 af41 ef" ] && ok "$1 stats: tunnel classes $got" || fail "$1 stats: tunnel classes '$got'"
done
# the core lists its peer by address and name, not by the ports it dialed from
# (a reconnect would be a new peer in /metrics)
got=$(px_stat "$HC" '" ".join(sorted(set(p["peer"].split(" class ")[0] for p in j["tunnel"]["peers"])))')
case $got in "127.0.0.1 ("*", store "*")") ok "core stats: one peer, $got" ;; *) fail "core stats: peers '$got'" ;; esac

SIZE=3000000
# xfer CLASS-NUMBER OP SEED [PORT]: a transfer through the forward (FP unless
# PORT), checked byte-exact
xfer() {
	local out
	if out=$(PX_DSCP=$1 pxt "$2" 127.0.0.1 "${4:-$FP}" "$3" $SIZE); then ok "dscp $1 $2: $out"; else fail "dscp $1 $2: $out"; fi
}
# owns CLASS DIR: during the last transfer, the tunnel bytes in direction DIR
# (tun_out / tun_back) were at least a quarter of SIZE in CLASS's connection,
# and the other connections carried under 2 % of that
owns() {
	local c=$1 dir=$2 mine other=0 x
	mine=$(delta "${dir}_$c")
	for x in af11 ef af41; do [ "$x" = "$c" ] || other=$((other + $(delta "${dir}_$x"))); done
	[ "$mine" -gt $((SIZE / 4)) ] && [ "$other" -lt $((mine / 50)) ] &&
		ok "$dir: $mine bytes in $c, $other in the others" || fail "$dir: $mine bytes in $c, $other in the others"
}

echo "== 2. an ef client, then an af41 client"
for pair in "46 ef 11" "34 af41 21"; do
	set -- $pair # new data for each (a repeat would cross as a few bytes)
	snap
	xfer "$1" get "$3"
	owns "$2" tun_back
	[ "$(delta "cli_$2")" -ge $SIZE ] && ok "to the client: $(delta "cli_$2") bytes in $2" ||
		fail "to the client: $(delta "cli_$2") bytes in $2"
	[ "$(delta "srv_$2")" -gt 0 ] && ok "core to server: $(delta "srv_$2") bytes in $2" ||
		fail "core to server: no $2 packets"
	snap
	xfer "$1" put $(($3 + 1))
	owns "$2" tun_out
	[ "$(delta "srv_$2")" -ge $SIZE ] && ok "upload to the server: $(delta "srv_$2") bytes in $2" ||
		fail "upload to the server: $(delta "srv_$2") bytes in $2"
done

echo "== 3. unmarked and cs1 clients ride the main connection"
snap
xfer 0 get 13
owns af11 tun_back
marked=0
for c in $CLASSES; do marked=$((marked + $(delta "cli_$c"))); done
[ "$marked" = 0 ] && ok "unmarked client: its answers unmarked" || fail "unmarked client: $marked marked bytes"
marked=0
for c in $CLASSES; do marked=$((marked + $(delta "srv_$c"))); done
[ "$marked" = 0 ] && ok "unmarked client: the core's packets to the server unmarked" ||
	fail "unmarked client: $marked marked bytes from the core to the server"
snap
xfer 8 get 14
owns af11 tun_back
[ "$(delta cli_cs1)" -ge $SIZE ] && ok "cs1 client: $(delta cli_cs1) bytes to it in cs1" ||
	fail "cs1 client: $(delta cli_cs1) bytes to it in cs1"
snap
xfer 8 put 16
owns af11 tun_out
[ "$(delta srv_cs1)" -ge $SIZE ] && ok "cs1 client: upload to the server, $(delta srv_cs1) bytes in cs1" ||
	fail "cs1 client: upload to the server, $(delta srv_cs1) bytes in cs1 ($(delta srv_af11) in af11)"

echo "== 4. classify: an unmarked client to the classified port is in af41"
snap
xfer 0 get 31 "$FP2"
owns af41 tun_back
[ "$(delta cli_af41)" -ge $SIZE ] && ok "to the client: $(delta cli_af41) bytes in af41" ||
	fail "to the client: $(delta cli_af41) bytes in af41"
for side in edge core; do
	grep -q "open .* -> 127.0.0.1:$SP2 (full, .*, class af41)" "$T/$side.log" &&
		ok "$side: the stream's open line names its class" ||
		fail "$side: no open line with class af41: $(grep "open .*:$SP2" "$T/$side.log" | head -n 2)"
done
snap
xfer 0 put 32 "$FP2"
owns af41 tun_out
[ "$(delta srv_af41)" -ge $SIZE ] && ok "upload to the server: $(delta srv_af41) bytes in af41" ||
	fail "upload to the server: $(delta srv_af41) bytes in af41"
snap
xfer 46 get 33 "$FP2"
owns ef tun_back
[ "$(delta cli_ef)" -ge $SIZE ] && ok "an ef client keeps ef: $(delta cli_ef) bytes to it in ef" ||
	fail "an ef client: $(delta cli_ef) bytes to it in ef"
# while such a stream is open, both ends' stats list it in af41 (JSON and table)
timeout 20 python3 tests/proxy/pxhold.py 127.0.0.1 "$FP2" 1 35 --sizes=100 --hold=3 --ready="$T/held" >"$T/hold.log" 2>&1 &
for _ in $(seq 50); do [ -s "$T/held" ] && break; sleep 0.1; done
for side in "edge $HE" "core $HC"; do
	set -- $side
	got=$(px_stat "$2" '" ".join(s["class"] or "-" for s in j["streams"] if s["dst"].endswith(":'"$SP2"'"))')
	[ "$got" = af41 ] && ok "$1 stats: the open stream in class $got" || fail "$1 stats: stream classes '$got' ($(cat "$T/held" 2>/dev/null))"
	"$BIN" stats --stats=127.0.0.1:"$2" | grep -q "^ *[0-9]* .*:$SP2 *full *af41 " &&
		ok "$1: wanopt stats shows the class" || fail "$1: wanopt stats: $("$BIN" stats --stats=127.0.0.1:"$2" 2>&1 | tail -n 3)"
done
wait $! && ok "held stream: $(cat "$T/hold.log")" || fail "held stream: $(cat "$T/hold.log")"
echo "classify = cs1 127.0.0.1:$SP2" >"$T/edge.conf"
r0=$(px_count_log edge "reloaded")
kill -HUP "${PID[edge]}"
px_wait_count edge "reloaded" $((r0 + 1)) 5 && ok "edge reloaded (classify = cs1)" || fail "edge reload: $(tail -n 2 "$T/edge.log")"
snap
xfer 0 get 34 "$FP2"
owns af11 tun_back
[ "$(delta cli_cs1)" -ge $SIZE ] && [ "$(delta srv_cs1)" -gt 0 ] &&
	ok "after the reload: $(delta cli_cs1) bytes to the client in cs1, $(delta srv_cs1) to the server" ||
	fail "after the reload: $(delta cli_cs1) bytes to the client in cs1, $(delta srv_cs1) to the server"

echo "== 5. fail open (direct) keeps the class"
px_stop core
sleep 1.5 # the edge notices within a second
snap
xfer 46 put 15
[ "$(delta srv_ef)" -ge $SIZE ] && ok "direct to the server: $(delta srv_ef) bytes in ef" ||
	fail "direct to the server: $(delta srv_ef) bytes in ef"
snap
xfer 0 put 35 "$FP2"
[ "$(delta srv_cs1)" -ge $SIZE ] && ok "classified, direct to the server: $(delta srv_cs1) bytes in cs1" ||
	fail "classified, direct to the server: $(delta srv_cs1) bytes in cs1"

echo "== 6. a bad class: file:line and exit status 2"
printf 'peer = 127.0.0.1:1\nstore = %s/x\ntls_cert = a\ntls_key = b\ntls_ca = c\ndscp_tunnels = ef, gold\n' "$T" >"$T/bad.conf"
rc=0
out=$("$BIN" edge -c "$T/bad.conf" 2>&1) || rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "bad.conf:6: .*unknown DSCP class 'gold'" && ok "bad class: $out" ||
	fail "bad class (status $rc): $out"
sed -i 's/gold/ef/' "$T/bad.conf"
rc=0
out=$("$BIN" edge -c "$T/bad.conf" 2>&1) || rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "listed twice" && ok "twice: $out" || fail "twice (status $rc): $out"
px_done
