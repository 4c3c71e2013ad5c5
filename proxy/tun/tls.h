/*
 * tls.h: TLS 1.3 contexts with mutual certificate authentication, and error
 * descriptions for failed handshakes (internal to proxy/tun).
 */
#ifndef WANOPT_TUN_TLS_H
#define WANOPT_TUN_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "tun.h"

struct bufferevent;

/* An SSL_CTX for the client or server side: TLS 1.3 only, our certificate
 * and key, peers verified against cfg->ca_file and required to present a
 * certificate.  NULL with err filled (naming the file at fault). */
SSL_CTX *tun_tls_ctx(const tun_config *cfg, int client, char *err, size_t errlen);
/* Make ssl (a server's, before its handshake) reject a peer certificate
 * whose leaf carries name (X509_check_host, no wildcards) even though it
 * verifies: the peer gets a bad_certificate alert, and tun_tls_reason says
 * which name.  name must outlive ssl.  0, or -1 if OpenSSL failed. */
int tun_tls_refuse(SSL *ssl, const char *name);
/* Why the TLS connection on bev failed: OpenSSL errors, the certificate
 * verification result, or the socket error; into buf. */
void tun_tls_reason(struct bufferevent *bev, short what, char *buf, size_t len);

#endif
