#!/usr/bin/env bash
# proxy_certs.test.sh: renewing the tunnel's certificates without a restart.
#
#   client --> edge    127.0.0.1:L  ==TLS==+
#   client --> stale   127.0.0.1:L2 ==TLS==+==> core 127.0.0.1:P --> server
#
# The edge and the core read certificate, key and CA from $T/pki; the stale
# edge from a copy of the first credentials that is never renewed.
# 1. At start each daemon logs its certificate's subject and expiry and
#    publishes the expiry (`wanopt stats --json`: tunnel.cert_not_after).
# 2. Credentials from a new CA are written over the files in place and both
#    daemons get SIGHUP: each logs the re-read; an interactive session and
#    the tunnel stay up across it.
# 3. The core restarts: the edge, reloaded but not restarted, dials it with
#    the new credentials and transfers are exact; the stale edge is refused
#    (so the credentials did change).
# 4. The other way: newer credentials (valid 10 days), SIGHUP to both, the
#    edge restarts: the reloaded core takes it.  Both warn that the
#    certificate expires within 30 days, and `wanopt stats` says so; the
#    core publishes its peer's certificate expiry too.
# 5. A certificate that does not load on SIGHUP: the reload is refused as a
#    bad file would be, and the running credentials kept (the edge still
#    dials the restarted core with them).  A key that is not the
#    certificate's is named as such at start (status 2).
# 6. A new CA with an overlap: both trust old and new CA (one file), the core
#    moves to its new certificate and takes an edge still on the old one;
#    then the edge moves, by reload, and gets into a core on the new CA alone.
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
px_setup

P=$(px_port) S1=$(px_port) S2=$(px_port) S3=$(px_port) L=$(px_port) L2=$(px_port)
px_server srv
SRV=$(cat "$T/srv.port")
MB=$((1 << 20))
cp -a "$T/pki" "$T/first"
"$BIN" pki init "$T/second" >/dev/null
"$BIN" pki init "$T/third" --days=10 >/dev/null

hup() {  # name: SIGHUP, then wait for the reload's end
	local mark
	mark=$(px_count_log "$1" "reloaded")
	kill -HUP "${PID[$1]}"
	px_wait_count "$1" "reloaded" $((mark + 1)) 10
}
start_edge() {
	px_edge edge "$P" "$S2" "--forward=127.0.0.1:$L -> 127.0.0.1:$SRV"
}
ups() { px_count_log "$1" "tunnel up"; }
restart_core() {  # stop and start the core; then the edge, not restarted, must dial it again
	local up_before
	up_before=$(ups edge)
	px_stop core
	px_core core "$P" "$S1" --allow=127.0.0.1/32
	px_wait_count edge "tunnel up" $((up_before + 1)) 15
}

# ---- 1. start ----
px_core core "$P" "$S1" --allow=127.0.0.1/32
start_edge
px_run stale edge --peer=127.0.0.1:"$P" --store="$T/stale.store" --tls_cert="$T/first/edge.crt" \
	--tls_key="$T/first/edge.key" --tls_ca="$T/first/ca.crt" --stats=127.0.0.1:"$S3" \
	"--forward=127.0.0.1:$L2 -> 127.0.0.1:$SRV"
px_wait_count stale "tunnel up" 1 15
for n in core edge; do
	grep -q "TLS: tls_cert $T/pki/$n.crt (O=wanopt/CN=wanopt-$n) valid until" "$T/$n.log" &&
		ok "$n logs its certificate: $(grep -m1 "TLS: tls_cert" "$T/$n.log" | cut -c26-)" ||
		fail "$n: no certificate line at start"
done
first_exp=$(px_stat "$S2" 'j["tunnel"]["cert_not_after"]')
now=$(date +%s)
[ "$first_exp" -gt $((now + 3640 * 86400)) ] && [ "$first_exp" -lt $((now + 3660 * 86400)) ] &&
	ok "expiry published: $(date -u -d "@$first_exp" +%F) (pki init's 3650 days)" ||
	fail "expiry published: $first_exp"
expect "through the edge at start" pxt get 127.0.0.1 "$L" 1 $MB

# ---- 2. renewed in place, SIGHUP ----
rm -f "$T/live.ready"
px_bg live live 127.0.0.1 "$L" 4 --ready="$T/live.ready" --timeout=30
px_wait_file "$T/live.ready"
cp "$T/second/"* "$T/pki/"
for n in core edge; do
	hup "$n" && grep -q "TLS: certificate, key and CA re-read" "$T/$n.log" &&
		ok "$n re-read its credentials on SIGHUP" || fail "$n: no re-read logged: $(tail -n 3 "$T/$n.log")"
done
px_bg_wait live 30
[ "$BG_RC" = 0 ] && ok "a session across the reloads: $BG_OUT" || fail "the session across the reloads: rc $BG_RC: $BG_OUT"

# ---- 3. the core restarts with them: the reloaded edge gets in, the stale one not ----
restart_core && ok "the reloaded edge is back in" ||
	fail "the reloaded edge did not get in: $(grep -i "tunnel" "$T/edge.log" | tail -n 3)"
expect "through the reloaded edge" pxt get 127.0.0.1 "$L" 2 $((4 * MB))
expect "upload through the reloaded edge" pxt put 127.0.0.1 "$L" 3 $((4 * MB))
px_wait_log core "tunnel refused" 15 >/dev/null && ok "the stale edge is refused: $(grep -m1 "tunnel refused" "$T/core.log" | cut -c26-)" ||
	fail "the stale edge was not refused"

# ---- 4. newer credentials, SIGHUP, the edge restarts: the reloaded core takes it ----
cp "$T/third/"* "$T/pki/"
hup core && hup edge || fail "reload: $(tail -n 2 "$T/core.log")"
for n in core edge; do
	grep -q "TLS: tls_cert $T/pki/$n.crt (O=wanopt/CN=wanopt-$n) expires on .* in 10 days" "$T/$n.log" &&
		ok "$n warns: $(grep "expires on" "$T/$n.log" | tail -n 1 | cut -c26-)" || fail "$n: no expiry warning"
done
px_stop edge
start_edge && ok "the restarted edge got into the reloaded core" || fail "the reloaded core refused the edge"
expect "through the restarted edge" pxt get 127.0.0.1 "$L" 4 $((4 * MB))
# the core sees each edge's certificate: the restarted one's 10 days, the stale one's not (refused)
sleep 1.5 # tunnel peers are published once a second
peer_exp=$(px_stat "$S1" 'min(p["cert_not_after"] for p in j["tunnel"]["peers"])')
now=$(date +%s)
[ "$peer_exp" -gt $((now + 9 * 86400)) ] && [ "$peer_exp" -le $((now + 10 * 86400)) ] &&
	ok "the core publishes the edge's certificate expiry: $(date -u -d "@$peer_exp" +%F)" ||
	fail "peer certificate expiry at the core: $peer_exp ($(px_stat "$S1" 'j["tunnel"]["peers"]'))"
"$BIN" stats --stats=127.0.0.1:"$S1" | grep -q "1 tunnel peer(s) with a certificate expiring within 30 days" &&
	ok "wanopt stats at the core: $("$BIN" stats --stats=127.0.0.1:"$S1" | grep "tunnel peer(s)")" ||
	fail "wanopt stats at the core does not name the edge: $("$BIN" stats --stats=127.0.0.1:"$S1" | head -n 5)"
"$BIN" stats --stats=127.0.0.1:"$S1" | grep -q "tunnel certificate expires in 10 days" &&
	ok "wanopt stats: $("$BIN" stats --stats=127.0.0.1:"$S1" | grep "certificate")" ||
	fail "wanopt stats does not warn: $("$BIN" stats --stats=127.0.0.1:"$S1" | head -n 4)"

# ---- 5. a certificate that does not load ----
echo "not a certificate" > "$T/pki/edge.crt"
hup edge || true
grep -q "reload: --tls_cert=[^ ]*: tls_cert: cannot load certificate $T/pki/edge.crt: .*; keeping the running configuration" "$T/edge.log" &&
	ok "a broken certificate refuses the reload: $(grep "reload: --tls_cert=.*: tls_cert" "$T/edge.log" | cut -c26-)" ||
	fail "broken certificate on SIGHUP: $(tail -n 3 "$T/edge.log")"
restart_core && ok "the edge still dials with the credentials it kept" ||
	fail "the edge lost its credentials: $(tail -n 3 "$T/edge.log")"
expect "through the edge after the broken reload" pxt get 127.0.0.1 "$L" 5 $MB
# a key that is not the certificate's: said so (OpenSSL's own words were "no certificate assigned")
rc=0
out=$("$BIN" core --listen=127.0.0.1:1 --allow=127.0.0.1 --store="$T/nostore" --tls_cert="$T/first/core.crt" \
	--tls_key="$T/second/core.key" --tls_ca="$T/first/ca.crt" 2>&1) || rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "tls_key: $T/second/core.key is not the key of the certificate in tls_cert" &&
	ok "a key that is not the certificate's: status 2, $out" || fail "mismatched key: status $rc, $out"

# ---- 6. a new CA with an overlap, as conf/README.md tells it ----
"$BIN" pki init "$T/fourth" >/dev/null
cp "$T/third/edge.crt" "$T/pki/edge.crt"
cat "$T/third/ca.crt" "$T/fourth/ca.crt" >"$T/pki/ca.crt"
hup core && hup edge || fail "reload with both CAs: $(tail -n 2 "$T/core.log")"
cp "$T/fourth/core.crt" "$T/fourth/core.key" "$T/pki/"
hup core || fail "core reload to its new certificate"
px_stop edge
start_edge && ok "CA overlap: the reloaded core (new certificate, both CAs) takes an edge on the old one" ||
	fail "CA overlap: the edge on the old certificate did not get in"
cp "$T/fourth/edge.crt" "$T/fourth/edge.key" "$T/pki/"
cp "$T/fourth/ca.crt" "$T/pki/ca.crt"
hup edge || fail "edge reload to its new certificate"
restart_core && ok "CA overlap: all on the new CA, the edge without a restart" ||
	fail "CA overlap: the edge on the new CA did not get in: $(tail -n 3 "$T/edge.log")"
expect "through the edge on the new CA" pxt get 127.0.0.1 "$L" 6 $MB
px_alive edge && px_alive core && ok "both daemons alive" || fail "a daemon died"
px_done
