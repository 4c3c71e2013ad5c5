/* test_pki.c: `wanopt pki`: files and modes, the chain verifies for TLS
 * client and server use, SANs, refusal to replace a CA, Ed25519, `issue`,
 * and a real TLS 1.3 handshake with mutual authentication (and a refused one
 * across two different CAs). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "../proxy/cmd.h"

static char tmpdir[64];
static char said[2048]; /* what the last pki() wrote to stderr */

/* Runs `wanopt pki ARGS...` (NULL-terminated) as main() does, its stderr
 * kept in said (and passed on), and returns its status. */
static int pki(const char *a0, ...)
{
	char *argv[16] = { "wanopt pki" };
	int argc = 1;
	va_list ap;
	va_start(ap, a0);
	for (const char *a = a0; a && argc < 15; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	optind = 0;
	FILE *tmp = tmpfile();
	int saved = dup(2);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	int rc = px_cmd_pki(argc, argv);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	said[fread(said, 1, sizeof said - 1, tmp)] = 0;
	fclose(tmp);
	fputs(said, stderr);
	return rc;
}

/* dir/name as a static path. */
static const char *path(const char *dir, const char *name)
{
	static char p[2][256];
	static int k;
	k ^= 1;
	snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
	return p[k];
}

static X509 *load_cert(const char *file)
{
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(x);
	return x;
}

static EVP_PKEY *load_key(const char *file)
{
	FILE *f = fopen(file, "r");
	assert_non_null(f);
	EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(k);
	return k;
}

/* Verifies leaf against ca for a purpose (X509_PURPOSE_SSL_CLIENT/SERVER). */
static int verify(X509 *ca, X509 *leaf, int purpose)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_STORE_add_cert(st, ca);
	X509_STORE_CTX_init(ctx, st, leaf, NULL);
	X509_STORE_CTX_set_purpose(ctx, purpose);
	int ok = X509_verify_cert(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok == 1;
}

/* Key files are 0600, certificates 0644. */
static void check_modes(const char *dir)
{
	static const char *const keys[] = { "ca.key", "edge.key", "core.key" };
	static const char *const certs[] = { "ca.crt", "edge.crt", "core.crt" };
	struct stat st;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(stat(path(dir, keys[i]), &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
		assert_int_equal(stat(path(dir, certs[i]), &st), 0);
		assert_int_equal(st.st_mode & 0777, 0644);
	}
}

/* init writes a verifying chain with the right extensions and SANs. */
static void test_init(void **state)
{
	char dir[128];
	snprintf(dir, sizeof dir, "%s/a", tmpdir);
	assert_int_equal(pki("init", dir, "--edge-san=branch1.example,10.1.0.1", NULL), 0);
	check_modes(dir);
	X509 *ca = load_cert(path(dir, "ca.crt"));
	X509 *edge = load_cert(path(dir, "edge.crt")), *core = load_cert(path(dir, "core.crt"));
	EVP_PKEY *ek = load_key(path(dir, "edge.key")), *ck = load_key(path(dir, "core.key"));
	assert_int_equal(EVP_PKEY_get_base_id(ek), EVP_PKEY_EC);
	assert_int_equal(X509_check_private_key(edge, ek), 1);
	assert_int_equal(X509_check_private_key(core, ck), 1);
	assert_int_equal(X509_check_private_key(edge, ck), 0);
	for (int i = 0; i < 2; i++) {
		X509 *leaf = i ? core : edge;
		assert_true(verify(ca, leaf, X509_PURPOSE_SSL_CLIENT));
		assert_true(verify(ca, leaf, X509_PURPOSE_SSL_SERVER));
		assert_int_equal(X509_check_ca(leaf), 0);
	}
	assert_true(X509_check_ca(ca) > 0);
	assert_int_equal(X509_check_host(edge, "branch1.example", 0, 0, NULL), 1);
	assert_int_equal(X509_check_ip_asc(edge, "10.1.0.1", 0), 1);
	assert_int_equal(X509_check_host(core, "wanopt-core", 0, 0, NULL), 1);
	assert_int_equal(X509_check_ip_asc(core, "127.0.0.1", 0), 1);
	assert_int_equal(X509_check_ip_asc(core, "::1", 0), 1);
	assert_int_equal(X509_check_host(core, "other.example", 0, 0, NULL), 0);
	/* A certificate signed by another CA does not verify. */
	char dir2[128];
	snprintf(dir2, sizeof dir2, "%s/b", tmpdir);
	assert_int_equal(pki("init", dir2, NULL), 0);
	X509 *other = load_cert(path(dir2, "edge.crt"));
	assert_false(verify(ca, other, X509_PURPOSE_SSL_CLIENT));
	X509_free(other);
	X509_free(ca);
	X509_free(edge);
	X509_free(core);
	EVP_PKEY_free(ek);
	EVP_PKEY_free(ck);
}

/* Reads a whole file into a malloc'd string. */
static char *slurp(const char *file)
{
	FILE *f = fopen(file, "r");
	char *b = calloc(1, 65536);
	assert_non_null(f);
	size_t n = fread(b, 1, 65535, f);
	b[n] = 0;
	fclose(f);
	return b;
}

/* An existing CA is kept unless --force; --force replaces it. */
static void test_refuse_force(void **state)
{
	char dir[128];
	snprintf(dir, sizeof dir, "%s/c", tmpdir);
	assert_int_equal(pki("init", dir, NULL), 0);
	char *before = slurp(path(dir, "ca.crt"));
	assert_int_equal(pki("init", dir, NULL), 1);
	char *same = slurp(path(dir, "ca.crt"));
	assert_string_equal(before, same);
	/* options that cannot make a good certificate: a usage error, nothing written */
	assert_int_equal(pki("init", dir, "--force", "--core-san=a,,b", NULL), 2);
	assert_int_equal(pki("init", dir, "--force", "--edge-san=bad name", NULL), 2);
	assert_int_equal(pki("init", dir, "--force", "--core-san=-bad", NULL), 2);
	assert_int_equal(pki("init", dir, "--force", "--core-san=999.1.1.1", NULL), 2);
	assert_int_equal(pki("init", dir, "--force", "--days=10x", NULL), 2);
	char *kept = slurp(path(dir, "ca.crt"));
	assert_string_equal(before, kept);
	free(kept);
	assert_int_equal(pki("init", dir, "--force", NULL), 0);
	char *after = slurp(path(dir, "ca.crt"));
	assert_string_not_equal(before, after);
	check_modes(dir);
	free(before);
	free(same);
	free(after);
	/* usage errors say what is wrong, named as `wanopt pki` */
	assert_int_equal(pki("bogus", NULL), 2);
	assert_string_equal(said, "wanopt pki: unknown command 'bogus' (init or issue; see wanopt pki --help)\n");
	assert_int_equal(pki("issue", dir, NULL), 2);
	assert_string_equal(said, "wanopt pki issue: expected DIR NAME, got 1 argument (see wanopt pki --help)\n");
	assert_int_equal(pki("init", dir, "--bogus", NULL), 2);
	assert_int_equal(strncmp(said, "wanopt pki: unrecognized option '--bogus'\n", 42), 0);
	assert_int_equal(pki("init", dir, "--key=rsa", NULL), 2);
	assert_int_equal(pki("init", dir, "--days=0", NULL), 2);
}

/* Ed25519 keys and `issue` of a further leaf. */
static void test_ed25519_issue(void **state)
{
	char dir[128];
	struct stat st;
	snprintf(dir, sizeof dir, "%s/d", tmpdir);
	assert_int_equal(pki("init", dir, "--key=ed25519", NULL), 0);
	EVP_PKEY *k = load_key(path(dir, "core.key"));
	assert_int_equal(EVP_PKEY_get_base_id(k), EVP_PKEY_ED25519);
	EVP_PKEY_free(k);
	X509 *ca = load_cert(path(dir, "ca.crt"));
	X509 *core = load_cert(path(dir, "core.crt"));
	assert_true(verify(ca, core, X509_PURPOSE_SSL_SERVER));
	assert_int_equal(pki("issue", dir, "branch2", "--san=branch2.example,192.0.2.7", NULL), 0);
	assert_int_equal(stat(path(dir, "branch2.key"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	X509 *b2 = load_cert(path(dir, "branch2.crt"));
	assert_true(verify(ca, b2, X509_PURPOSE_SSL_CLIENT));
	assert_int_equal(X509_check_ip_asc(b2, "192.0.2.7", 0), 1);
	assert_int_equal(pki("issue", dir, "branch2", NULL), 1);   /* exists */
	assert_int_equal(pki("issue", dir, "../x", NULL), 2);
	X509_free(b2);
	X509_free(core);
	X509_free(ca);
}

/* A TLS context presenting name.crt/.key and requiring a peer cert from ca. */
static SSL_CTX *tls_ctx(const char *dir, const char *name, const char *cadir, int server)
{
	char f[256];
	SSL_CTX *c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
	snprintf(f, sizeof f, "%s/%s.crt", dir, name);
	assert_int_equal(SSL_CTX_use_certificate_file(c, f, SSL_FILETYPE_PEM), 1);
	snprintf(f, sizeof f, "%s/%s.key", dir, name);
	assert_int_equal(SSL_CTX_use_PrivateKey_file(c, f, SSL_FILETYPE_PEM), 1);
	snprintf(f, sizeof f, "%s/ca.crt", cadir);
	assert_int_equal(SSL_CTX_load_verify_locations(c, f, NULL), 1);
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	return c;
}

/* Runs a handshake between edge (client) and core (server) over a
 * socketpair; returns 1 when both sides completed with a verified peer. */
static int handshake(const char *edir, const char *cdir)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	SSL_CTX *cc = tls_ctx(edir, "edge", edir, 0), *sc = tls_ctx(cdir, "core", cdir, 1);
	SSL *c = SSL_new(cc), *s = SSL_new(sc);
	SSL_set_fd(c, sv[0]);
	SSL_set_fd(s, sv[1]);
	SSL_set1_host(c, "wanopt-core");
	/* Blocking sockets: drive the two sides from two processes' worth of
	 * steps using non-blocking mode and alternating calls. */
	BIO_socket_nbio(sv[0], 1);
	BIO_socket_nbio(sv[1], 1);
	int cd = 0, sd = 0, fail = 0;
	for (int i = 0; i < 1000 && !(cd && sd) && !fail; i++) {
		if (!cd) {
			int r = SSL_connect(c);
			if (r == 1) cd = 1;
			else if (SSL_get_error(c, r) != SSL_ERROR_WANT_READ) fail = 1;
		}
		if (!sd) {
			int r = SSL_accept(s);
			if (r == 1) sd = 1;
			else if (SSL_get_error(s, r) != SSL_ERROR_WANT_READ) fail = 1;
		}
	}
	/* TLS 1.3: the server learns of a bad client certificate after the
	 * client thinks it is done; make the client read the verdict. */
	char b;
	if (!fail && cd && sd && SSL_write(s, "k", 1) == 1) {
		for (int i = 0; i < 100; i++) {
			int r = SSL_read(c, &b, 1);
			if (r == 1) break;
			if (SSL_get_error(c, r) != SSL_ERROR_WANT_READ) { fail = 1; break; }
		}
	}
	int ok = !fail && cd && sd && SSL_get_verify_result(c) == X509_V_OK &&
		 SSL_get_verify_result(s) == X509_V_OK && strcmp(SSL_get_version(c), "TLSv1.3") == 0;
	SSL_free(c);
	SSL_free(s);
	SSL_CTX_free(cc);
	SSL_CTX_free(sc);
	close(sv[0]);
	close(sv[1]);
	ERR_clear_error();
	return ok;
}

/* Mutual TLS 1.3 works within one pki dir and fails across two CAs. */
static void test_tls(void **state)
{
	char a[128], b[128];
	snprintf(a, sizeof a, "%s/a", tmpdir);
	snprintf(b, sizeof b, "%s/b", tmpdir);
	assert_true(handshake(a, a));
	assert_false(handshake(a, b));
	snprintf(b, sizeof b, "%s/d", tmpdir); /* Ed25519 pair */
	assert_true(handshake(b, b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_refuse_force),
		cmocka_unit_test(test_ed25519_issue),
		cmocka_unit_test(test_tls),
	};
	snprintf(tmpdir, sizeof tmpdir, "/tmp/wanopt-test-pki-XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		rc = rc ? rc : 1;
	return rc;
}
