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
/* Why the TLS connection on bev failed: OpenSSL errors, the certificate
 * verification result, or the socket error; into buf. */
void tun_tls_reason(struct bufferevent *bev, short what, char *buf, size_t len);

#endif
