#!/usr/bin/env bash
# proxy_names.test.sh: targets given by name, looked up at the core while the
# stream waits, and streams that go before the answer comes.
#
#   client --> edge 127.0.0.1:L (-> slow.wanopt.test:SRV) ==TLS==> core --> server
#                                                                   |
#                              slow DNS 127.0.0.1:D (answers after 1.5 s, A 127.0.0.1)
#
# The core runs in a mount namespace of its own whose /etc/resolv.conf names
# the slow DNS server (nothing of the host's is changed).
# 1. A name that resolves slowly still connects: byte-exact.
# 2. Clients that reset their connection while the name is looked up (the
#    edge resets the stream): the core drops the lookup's stream when the
#    answer comes, and survives (it used freed memory here once, and died).
# 3. The tunnel going down with lookups pending (the edge SIGKILLed): the
#    core survives; a new edge then carries transfers again.
# 4. resolv.conf changed under the running core (no reload): its next
#    lookups ask the name servers now listed, as the C library's would.
# 5. A forward's listen name that moved (a second edge, in a mount namespace
#    of its own with a hosts file of the test's): on reload the edge listens
#    at the new address and no longer at the old; a listen address written
#    another way that resolves to where it listens keeps its listener.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup
command -v unshare >/dev/null || { echo "SKIP: no unshare"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a mount namespace for resolv.conf)"; exit 0; }

P=$(px_port) S1=$(px_port) S2=$(px_port) L=$(px_port) D=$(px_port) NX=$(px_port) S3=$(px_port) L2=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
MB=$((1 << 20))

cat >"$T/dns.py" <<'PY'
# dns.py PORT [nx]: answers every A query with 127.0.0.1 after 1.5 s (AAAA:
# no address); with nx, every query at once with "no such name".
import socket, struct, sys, threading, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
nx = sys.argv[2:] == ["nx"]
def answer(q, addr):
    i = 12
    while q[i]:
        i += q[i] + 1
    if nx:
        s.sendto(q[:2] + struct.pack(">HHHHH", 0x8183, 1, 0, 0, 0) + q[12:i + 5], addr)
        return
    time.sleep(1.5)
    qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
    ans, an = b"", 0
    if qtype == 1:
        ans, an = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton("127.0.0.1"), 1
    s.sendto(q[:2] + struct.pack(">HHHHH", 0x8180, 1, an, 0, 0) + q[12:i + 5] + ans, addr)
while True:
    q, addr = s.recvfrom(2048)
    threading.Thread(target=answer, args=(q, addr), daemon=True).start()
PY
timeout 300 python3 "$T/dns.py" "$D" >"$T/dns.log" 2>&1 &
PID[dns]=$!
printf 'nameserver 127.0.0.1:%s\noptions timeout:5 attempts:1\n' "$D" >"$T/resolv.conf"
# the core, in a mount namespace of its own with that resolv.conf
case $BIN in /*) ABSBIN=$BIN ;; *) ABSBIN=$PWD/$BIN ;; esac
cat >"$T/nscore" <<SH
#!/bin/sh
exec unshare -m --propagation private sh -c 'mount --bind "$T/resolv.conf" /etc/resolv.conf && exec "\$0" "\$@"' "$ABSBIN" "\$@"
SH
chmod +x "$T/nscore"
REALBIN=$BIN
BIN="$T/nscore"
px_core core "$P" "$S1" --allow=127.0.0.0/8
BIN=$REALBIN
edge() { px_edge edge "$P" "$S2" "--forward=127.0.0.1:$L -> slow.wanopt.test:$SRV"; }
edge

# ---- 1. a slow name still connects ----
expect "download to a name that takes 1.5 s to resolve" pxt get 127.0.0.1 "$L" 1 $MB

# ---- 2. clients that give up while the name is looked up ----
cat >"$T/abort.py" <<'PY'
# Connects, sends a request, resets the connection 0.2 s later (before the answer).
import socket, struct, sys, time
for _ in range(int(sys.argv[2])):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"GET 2 1048576\n")
    time.sleep(0.2)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
PY
timeout 30 python3 "$T/abort.py" "$L" 5
sleep 2 # the answers come
px_alive core && ok "the core survived 5 streams reset during their lookups" ||
	fail "the core died when streams went during their lookups (status: $(px_stop core; echo $PX_STATUS))"
expect "download after the resets" pxt get 127.0.0.1 "$L" 3 $MB

# ---- 3. the tunnel goes down with lookups pending ----
for i in 1 2 3; do px_bg "cut$i" get 127.0.0.1 "$L" $((10 + i)) $MB --timeout=20; done
sleep 0.4
px_stop edge KILL
sleep 2
px_alive core && ok "the core survived the tunnel going down during 3 lookups" ||
	fail "the core died when the tunnel went down during lookups"
for i in 1 2 3; do
	px_bg_wait "cut$i" 20
	[ "$BG_RC" != 0 ] && ok "client $i of the cut tunnel ended with an error: $BG_OUT" ||
		fail "client $i of the cut tunnel: '$BG_OUT' (a complete transfer through a dead edge?)"
done
edge
expect "download through a new edge" pxt get 127.0.0.1 "$L" 4 $MB

# ---- 4. resolv.conf changed under the running core ----
# Rewritten in place: the core's bind mount shows the same file changed, as
# a DHCP client's or an administrator's edit would.
timeout 300 python3 "$T/dns.py" "$NX" nx >"$T/dnsnx.log" 2>&1 &
PID[dnsnx]=$!
printf 'nameserver 127.0.0.1:%s\noptions timeout:5 attempts:1\n' "$NX" >"$T/resolv.conf"
sleep 1.2 # the core looks at the file at most once a second
out=$(pxt get 127.0.0.1 "$L" 5 $MB --timeout=10 2>&1) || true
case $out in
short*|reset*) ok "with the name server changed to one that knows no such name: $out" ;;
*) fail "with the name server changed to one that knows no such name, expected a reset, got '$out'" ;;
esac
px_wait_count core "/etc/resolv.conf changed" 1 5 && ok "the core logged the change" ||
	fail "no log line at the core about the changed resolv.conf"
printf 'nameserver 127.0.0.1:%s\noptions timeout:5 attempts:1\n' "$D" >"$T/resolv.conf"
sleep 1.2
expect "download with the first name server listed again" pxt get 127.0.0.1 "$L" 6 $MB

# ---- 5. a forward's listen name moved ----
printf '127.0.0.1 localhost\n127.0.0.2 fwd.wanopt.test\n' >"$T/hosts"
cat >"$T/nsedge" <<SH
#!/bin/sh
exec unshare -m --propagation private sh -c 'mount --bind "$T/hosts" /etc/hosts && exec "\$0" "\$@"' "$ABSBIN" "\$@"
SH
chmod +x "$T/nsedge"
echo "forward = fwd.wanopt.test:$L2 -> 127.0.0.1:$SRV" >"$T/edge2.conf"
BIN="$T/nsedge"
px_edge edge2 "$P" "$S3" -c "$T/edge2.conf"
BIN=$REALBIN
hup2() {  # SIGHUP edge2 and wait for its "reloaded" line
	local r0 i
	r0=$(px_count_log edge2 "reloaded")
	kill -HUP "${PID[edge2]}"
	for i in $(seq 50); do
		[ "$(px_count_log edge2 "reloaded")" -gt "$r0" ] && return 0
		sleep 0.1
	done
	return 1
}
expect "download through the forward at fwd.wanopt.test (127.0.0.2)" pxt get 127.0.0.2 "$L2" 7 $MB
printf '127.0.0.1 localhost\n127.0.0.3 fwd.wanopt.test\n' >"$T/hosts"
hup2 && ok "edge reloaded with fwd.wanopt.test moved to 127.0.0.3" || fail "edge2 did not reload"
expect "download through the forward at its new address" pxt get 127.0.0.3 "$L2" 8 $MB
out=$(pxt get 127.0.0.2 "$L2" 9 $MB --timeout=5 2>&1) && fail "the old address still listens: $out" ||
	ok "the old address no longer listens: $out"
kept0=$(px_count_log edge2 "(listening still)")
echo "forward = 127.0.0.3:$L2 -> 127.0.0.1:$SRV" >"$T/edge2.conf"
hup2 && ok "edge reloaded with the listen address written as 127.0.0.3" || fail "edge2 did not reload"
[ "$(px_count_log edge2 "(listening still)")" -gt "$kept0" ] && ok "its listener was kept" ||
	fail "the listener at 127.0.0.3 was opened again: $(grep -F "forward 127.0.0.3" "$T/edge2.log" | tail -n 1)"
expect "download through the kept listener" pxt get 127.0.0.3 "$L2" 10 $MB
px_done
