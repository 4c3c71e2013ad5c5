/*
 * tls.c: TLS 1.3 contexts for the tunnel and readable handshake failures.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "conn_int.h"
#include "tls.h"

/* Describe the newest OpenSSL error of the thread queue after prefix. */
static void ssl_fail(char *err, size_t errlen, const char *what, const char *file)
{
	char e[256] = "unknown error";
	unsigned long code = ERR_peek_last_error();
	FILE *f = file ? fopen(file, "r") : NULL;

	if (file && !f)
		snprintf(e, sizeof e, "%s", strerror(errno)); /* clearer than "system lib" */
	else if (code)
		ERR_error_string_n(code, e, sizeof(e));
	if (f)
		fclose(f);
	ERR_clear_error();
	snprintf(err, errlen, "%s %s: %s", what, file ? file : "(not set)", e);
}

/* The last OpenSSL error says a key is not its certificate's (the queue is
 * left as it is). */
static int key_mismatch(void)
{
	unsigned long e = ERR_peek_last_error();
	return ERR_GET_LIB(e) == ERR_LIB_X509 &&
	       (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH || ERR_GET_REASON(e) == X509_R_KEY_TYPE_MISMATCH);
}

/* Build the client or server SSL_CTX (see tls.h). */
SSL_CTX *tun_tls_ctx(const tun_config *cfg, int client, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(client ? TLS_client_method() : TLS_server_method());

	if (!ctx) {
		ssl_fail(err, errlen, "TLS", "context");
		goto err_0;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION)) {
		ssl_fail(err, errlen, "TLS", "1.3 unavailable");
		goto err_1;
	}
	if (!cfg->cert_file || SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1) {
		ssl_fail(err, errlen, "tls_cert: cannot load certificate", cfg->cert_file);
		goto err_1;
	}
	if (!cfg->key_file || SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) != 1) {
		if (!cfg->key_file || !key_mismatch()) {
			ssl_fail(err, errlen, "tls_key: cannot load key", cfg->key_file);
			goto err_1;
		}
	}
	if (key_mismatch() || SSL_CTX_check_private_key(ctx) != 1) { /* (OpenSSL: "no certificate assigned") */
		ERR_clear_error();
		snprintf(err, errlen, "tls_key: %s is not the key of the certificate in tls_cert %s", cfg->key_file,
			 cfg->cert_file);
		goto err_1;
	}
	if (!cfg->ca_file || SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL) != 1) {
		ssl_fail(err, errlen, "tls_ca: cannot load CA", cfg->ca_file);
		goto err_1;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	if (!client) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->ca_file);
		if (names)
			SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_num_tickets(ctx, 0);  /* one long-lived connection: no resumption */
	}
	return ctx;
err_1:
	SSL_CTX_free(ctx);
err_0:
	return NULL;
}

/* A tun_tls is an SSL_CTX: OpenSSL counts the references, and each SSL
 * made from it holds one of its own. */
tun_tls *tun_tls_load(const tun_config *cfg, int client, char *err, size_t errlen)
{
	return (tun_tls *)tun_tls_ctx(cfg, client, err, errlen);
}

tun_tls *tun_tls_ref(tun_tls *t)
{
	SSL_CTX_up_ref((SSL_CTX *)t);
	return t;
}

void tun_tls_unref(tun_tls *t)
{
	SSL_CTX_free((SSL_CTX *)t);
}

/* When certificate x stops being valid (Unix time), 0 if unreadable. */
static int64_t x509_not_after(const X509 *x)
{
	struct tm tm;
	if (!x || ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1)
		return 0;
	return (int64_t)timegm(&tm);
}

int64_t tun_tls_not_after(const tun_tls *t, char *subj, size_t len)
{
	X509 *x = SSL_CTX_get0_certificate((const SSL_CTX *)t);

	if (len)
		subj[0] = 0;
	if (!x)
		return 0;
	X509_NAME_oneline(X509_get_subject_name(x), subj, (int)len);
	if (subj[0] == '/')
		memmove(subj, subj + 1, strlen(subj));
	return x509_not_after(x);
}

int64_t tun_conn_peer_not_after(const tun_conn *c)
{
	SSL *ssl = c->bev ? bufferevent_openssl_get_ssl(c->bev) : NULL;
	return ssl ? x509_not_after(SSL_get0_peer_certificate(ssl)) : 0;
}

static int refuse_idx = -1;
static pthread_once_t refuse_once = PTHREAD_ONCE_INIT;

static void refuse_idx_make(void)
{
	refuse_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* The name an SSL refuses in its peer's certificate, NULL if none. */
static const char *refused_name(SSL *ssl)
{
	pthread_once(&refuse_once, refuse_idx_make);
	return ssl && refuse_idx >= 0 ? SSL_get_ex_data(ssl, refuse_idx) : NULL;
}

/* Verification callback: a chain that verified is still rejected
 * (X509_V_ERR_CERT_REJECTED, so the peer gets a bad_certificate alert) when
 * its leaf carries the SSL's refused name. */
static int refuse_verify(int ok, X509_STORE_CTX *x)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
	const char *name = refused_name(ssl);
	X509 *leaf = X509_STORE_CTX_get_current_cert(x);

	if (!ok || X509_STORE_CTX_get_error_depth(x) != 0 || !name || !leaf)
		return ok;
	if (X509_check_host(leaf, name, 0, X509_CHECK_FLAG_NO_WILDCARDS, NULL) != 1)
		return 1;
	X509_STORE_CTX_set_error(x, X509_V_ERR_CERT_REJECTED);
	return 0;
}

int tun_tls_refuse(SSL *ssl, const char *name)
{
	pthread_once(&refuse_once, refuse_idx_make);
	if (refuse_idx < 0 || !SSL_set_ex_data(ssl, refuse_idx, (void *)name))
		return -1;
	SSL_set_verify(ssl, SSL_get_verify_mode(ssl), refuse_verify);
	return 0;
}

/* Append "; " and text to buf if there is room. */
static void append(char *buf, size_t len, const char *text)
{
	size_t n = strlen(buf);

	if (n + 3 >= len)
		return;
	snprintf(buf + n, len - n, "%s%s", n ? "; " : "", text);
}

/* ssl's verification failed on its refused name (refuse_verify). */
static int refused(SSL *ssl)
{
	return ssl && refused_name(ssl) && SSL_get_verify_result(ssl) == X509_V_ERR_CERT_REJECTED;
}

/* Collect the reasons of a failed TLS connection into buf. */
void tun_tls_reason(struct bufferevent *bev, short what, char *buf, size_t len)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	int saved_errno = errno;
	unsigned long e;
	char tmp[256];

	buf[0] = 0;
	while ((e = bufferevent_get_openssl_error(bev)) != 0) {
		if (ERR_GET_LIB(e) == 0)
			continue;   /* libevent's record of a syscall result, not an OpenSSL error */
		if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
			append(buf, len, "connection closed by peer");
			continue;
		}
		if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED &&
		    refused(ssl))
			continue;   /* said below */
		ERR_error_string_n(e, tmp, sizeof(tmp));
		append(buf, len, tmp);
		if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) >= SSL_AD_REASON_OFFSET)
			append(buf, len, "the peer refused the connection (its log says why)");
	}
	long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	if (refused(ssl)) {
		snprintf(tmp, sizeof(tmp), "its certificate carries the name %s: a certificate of that role cannot"
			 " serve as a peer's here (give each its own: wanopt pki issue)", refused_name(ssl));
		append(buf, len, tmp);
	} else if (vr != X509_V_OK) {
		/* the name the client required (tun_config.peer_name) */
		const char *host = vr == X509_V_ERR_HOSTNAME_MISMATCH ? X509_VERIFY_PARAM_get0_host(SSL_get0_param(ssl), 0)
								       : NULL;
		snprintf(tmp, sizeof(tmp), "peer certificate: %s%s%s%s", X509_verify_cert_error_string(vr),
			 host ? " (it must carry the name " : "", host ? host : "",
			 host ? ", as `wanopt pki` certificates for a core do)" : "");
		append(buf, len, tmp);
	}
	if (!buf[0] && (what & BEV_EVENT_EOF))
		append(buf, len, "connection closed by peer");
	if (!buf[0] && saved_errno)
		append(buf, len, strerror(saved_errno));
	if (!buf[0])
		append(buf, len, "connection failed");
	ERR_clear_error();
}
