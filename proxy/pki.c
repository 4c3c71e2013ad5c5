/* pki.c: `wanopt pki init DIR` and `wanopt pki issue DIR NAME`: a private CA
 * and CA-signed leaf certificates for the tunnel's mutual TLS, with the
 * OpenSSL 3 API.  Leaves carry serverAuth and clientAuth, so either end of a
 * tunnel can use them; private keys are written with mode 0600. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>

#include "tun.h"
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "cmd.h"
#include "conf.h"

#define PKI_PATH_MAX 4096

struct pki_opts {
	const char *dir;
	int force;
	long days;
	int ed25519;              /* else EC P-256 */
	const char *edge_san, *core_san, *ca_name, *san;
};

/* Prints "wanopt pki: what arg" plus OpenSSL's queued errors; returns -1. */
static int pki_fail(const char *what, const char *arg)
{
	unsigned long e;

	fprintf(stderr, "wanopt pki: %s%s", what, arg);
	while ((e = ERR_get_error()))
		fprintf(stderr, ": %s", ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "?");
	fputc('\n', stderr);
	return -1;
}

/* A fresh P-256 or Ed25519 key. */
static EVP_PKEY *pki_keygen(int ed25519)
{
	if (ed25519)
		return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

/* Adds one extension given in OpenSSL's config syntax. */
static int pki_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = ext && X509_add_ext(x, ext, -1);

	X509_EXTENSION_free(ext);
	return ok ? 0 : -1;
}

/* Turns "name,1.2.3.4,::1" into "DNS:name,IP:1.2.3.4,IP:::1" (malloc'd). */
static char *pki_san(const char *list)
{
	size_t cap = strlen(list) * 2 + 16, len = 0;
	char *out = malloc(cap), *copy = strdup(list), *save = NULL;

	if (!out || !copy) {
		free(out);
		free(copy);
		return NULL;
	}
	out[0] = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		for (char *e = t + strlen(t); e > t && e[-1] == ' ';)
			*--e = 0;
		if (!*t)
			continue;
		unsigned char buf[16];
		int ip = inet_pton(AF_INET, t, buf) == 1 || inet_pton(AF_INET6, t, buf) == 1;
		len += (size_t)snprintf(out + len, cap - len, "%s%s:%s", len ? "," : "", ip ? "IP" : "DNS", t);
	}
	free(copy);
	return out;
}

/* A host name: dot-separated labels of letters, digits, '-' and '_', none
 * empty or beginning or ending with '-', and not all digits and dots (what
 * looks like an IPv4 address must be one). */
static int pki_host_ok(const char *h)
{
	int alpha = 0;
	for (const char *l = h; *l;) {
		size_t n = strcspn(l, ".");
		if (!n || n > 63 || l[0] == '-' || l[n - 1] == '-')
			return 0;
		for (size_t i = 0; i < n; i++) {
			if (!isalnum((unsigned char)l[i]) && l[i] != '-' && l[i] != '_')
				return 0;
			alpha |= !isdigit((unsigned char)l[i]);
		}
		l += n;
		if (*l == '.' && !*++l)
			return 0; /* a trailing dot */
	}
	return *h && alpha;
}

/* A --*-san list: entries split by commas (spaces around them allowed), each
 * an IP address or a host name (letters, digits, '-', '_', '.', a leading
 * "*." for a wildcard).  0, or 2 with what is wrong on stderr. */
static int pki_san_check(const char *opt, const char *list)
{
	for (const char *p = list;; p++) {
		size_t n = strcspn(p, ",");
		while (n && *p == ' ')
			p++, n--;
		while (n && p[n - 1] == ' ')
			n--;
		char t[256];
		int ok = n > 0 && n < sizeof t;
		if (ok) {
			memcpy(t, p, n);
			t[n] = 0;
			unsigned char buf[16];
			if (inet_pton(AF_INET, t, buf) != 1 && inet_pton(AF_INET6, t, buf) != 1)
				ok = pki_host_ok(t + (!strncmp(t, "*.", 2) ? 2 : 0));
		}
		if (!ok) {
			fprintf(stderr, "wanopt pki: --%s: '%.*s' is neither a host name nor an IP address\n", opt,
				(int)n, p);
			return 2;
		}
		p += strcspn(p, ",");
		if (!*p)
			return 0;
	}
}

/* 1 if the comma-separated list names name. */
static int pki_has_name(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

/* The first entry of a SAN list (the leaf's common name). */
static void pki_first(const char *list, char *out, size_t len)
{
	size_t n = strcspn(list, ",");
	snprintf(out, len, "%.*s", (int)n, list);
}

/* Random positive 127-bit serial, validity, subject, issuer, key. */
static int pki_cert_base(X509 *x, EVP_PKEY *key, const char *cn, X509 *issuer, long days)
{
	BIGNUM *bn = BN_new();
	X509_NAME *name = X509_get_subject_name(x);
	int ok = bn && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
		 BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
		 X509_set_version(x, X509_VERSION_3) &&
		 X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
		 X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0, NULL) &&
		 X509_set_pubkey(x, key) &&
		 X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"wanopt", -1, -1, 0) &&
		 X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0) &&
		 X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
	BN_free(bn);
	return ok ? 0 : -1;
}

/* Builds a certificate for key: a self-signed CA when issuer is NULL, else a
 * leaf with SAN signed by issuer's key. */
static X509 *pki_cert(EVP_PKEY *key, const char *cn, const char *san, X509 *issuer,
		      EVP_PKEY *issuer_key, long days)
{
	X509 *x = X509_new();
	X509V3_CTX ctx;
	char *sanv = NULL;
	int ok;

	if (!x || pki_cert_base(x, key, cn, issuer, days) < 0)
		goto fail;
	X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
	if (!issuer) {
		ok = !pki_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
		     !pki_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign") &&
		     !pki_ext(x, &ctx, NID_subject_key_identifier, "hash") &&
		     !pki_ext(x, &ctx, NID_authority_key_identifier, "keyid:always");
	} else {
		ok = (sanv = pki_san(san)) &&
		     !pki_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE") &&
		     !pki_ext(x, &ctx, NID_key_usage, "critical,digitalSignature") &&
		     !pki_ext(x, &ctx, NID_ext_key_usage, "serverAuth,clientAuth") &&
		     !pki_ext(x, &ctx, NID_subject_key_identifier, "hash") &&
		     !pki_ext(x, &ctx, NID_authority_key_identifier, "keyid:always") &&
		     (!sanv[0] || !pki_ext(x, &ctx, NID_subject_alt_name, sanv));
	}
	free(sanv);
	EVP_PKEY *signer = issuer ? issuer_key : key;
	/* Ed25519 signs the message itself: no separate digest. */
	if (!ok || !X509_sign(x, signer, EVP_PKEY_id(signer) == EVP_PKEY_ED25519 ? NULL : EVP_sha256()))
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* Writes a PEM object to dir/name via a temporary file and rename(2), with
 * the given mode (0600 for keys) set before any byte is written. */
static int pki_write(const char *dir, const char *name, mode_t mode, X509 *cert, EVP_PKEY *key)
{
	char path[PKI_PATH_MAX], tmp[PKI_PATH_MAX];
	FILE *f;
	int fd, ok;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0 || fchmod(fd, mode) < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		fprintf(stderr, "wanopt pki: %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	ok = cert ? PEM_write_X509(f, cert) : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
	ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
	if (fclose(f) != 0 || !ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return pki_fail("cannot write ", path);
	}
	return 0;
}

/* Writes cert and key as NAME.crt (0644) and NAME.key (0600). */
static int pki_write_pair(const char *dir, const char *name, X509 *cert, EVP_PKEY *key)
{
	char f[256];

	snprintf(f, sizeof f, "%s.key", name);
	if (pki_write(dir, f, 0600, NULL, key) < 0)
		return -1;
	snprintf(f, sizeof f, "%s.crt", name);
	return pki_write(dir, f, 0644, cert, NULL);
}

/* Issues a leaf named name for san under the CA and writes it. */
static int pki_leaf(const struct pki_opts *o, const char *name, const char *san, X509 *ca,
		    EVP_PKEY *ca_key)
{
	char cn[256];
	EVP_PKEY *key = pki_keygen(o->ed25519);
	X509 *x = NULL;
	int rc = -1;

	pki_first(san, cn, sizeof cn);
	if (!key || !(x = pki_cert(key, cn[0] ? cn : name, san, ca, ca_key, o->days)))
		pki_fail("cannot make the certificate ", name);
	else
		rc = pki_write_pair(o->dir, name, x, key);
	X509_free(x);
	EVP_PKEY_free(key);
	return rc;
}

/* Fails when a file init would replace exists (unless --force). */
static int pki_check_free(const struct pki_opts *o)
{
	static const char *const files[] = { "ca.crt", "ca.key", "edge.crt", "edge.key",
					     "core.crt", "core.key" };
	char path[PKI_PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < sizeof files / sizeof files[0] && !o->force; i++) {
		snprintf(path, sizeof path, "%s/%s", o->dir, files[i]);
		if (stat(path, &st) == 0) {
			fprintf(stderr, "wanopt pki: %s exists: refusing to replace the CA and its "
				"certificates (use --force)\n", path);
			return -1;
		}
	}
	return 0;
}

/* pki init: CA, edge and core. */
static int pki_init(const struct pki_opts *o)
{
	EVP_PKEY *ca_key = NULL;
	X509 *ca = NULL;
	int rc = 1;

	if (pki_check_free(o) < 0)
		return 1;
	if (mkdir(o->dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "wanopt pki: %s: %s\n", o->dir, strerror(errno));
		return 1;
	}
	if (!(ca_key = pki_keygen(o->ed25519)) ||
	    !(ca = pki_cert(ca_key, o->ca_name, NULL, NULL, NULL, o->days))) {
		pki_fail("cannot make the CA", "");
		goto out;
	}
	/* edges require the core's certificate to carry PKI_CORE_NAME (so an edge
	 * certificate cannot pose as a core): add it to a custom list */
	char core_san[1024];
	snprintf(core_san, sizeof core_san, "%s%s%s", o->core_san,
		 pki_has_name(o->core_san, PKI_CORE_NAME) ? "" : ",", pki_has_name(o->core_san, PKI_CORE_NAME) ? "" : PKI_CORE_NAME);
	if (pki_write_pair(o->dir, "ca", ca, ca_key) < 0 ||
	    pki_leaf(o, "edge", o->edge_san, ca, ca_key) < 0 ||
	    pki_leaf(o, "core", core_san, ca, ca_key) < 0)
		goto out;
	printf("wrote %s/{ca,edge,core}.{crt,key}: copy ca.crt and edge.* to the edge, ca.crt and\n"
	       "core.* to the core; keep ca.key offline (only `pki issue` needs it).\n", o->dir);
	rc = 0;
out:
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	return rc;
}

/* Reads DIR/ca.crt and DIR/ca.key. */
static int pki_load_ca(const char *dir, X509 **ca, EVP_PKEY **key)
{
	char path[PKI_PATH_MAX];
	FILE *f;

	snprintf(path, sizeof path, "%s/ca.crt", dir);
	if (!(f = fopen(path, "r")) || !(*ca = PEM_read_X509(f, NULL, NULL, NULL))) {
		if (f)
			fclose(f);
		return pki_fail("cannot read ", path);
	}
	fclose(f);
	snprintf(path, sizeof path, "%s/ca.key", dir);
	if (!(f = fopen(path, "r")) || !(*key = PEM_read_PrivateKey(f, NULL, NULL, NULL))) {
		if (f)
			fclose(f);
		return pki_fail("cannot read ", path);
	}
	fclose(f);
	return 0;
}

/* pki issue DIR NAME: another leaf (e.g. a second branch's edge). */
static int pki_issue(const struct pki_opts *o, const char *name)
{
	char path[PKI_PATH_MAX];
	struct stat st;
	X509 *ca = NULL;
	EVP_PKEY *ca_key = NULL;
	int rc = 1;

	if (!name[0] || strchr(name, '/') || name[0] == '.' || !strcmp(name, "ca")) {
		fprintf(stderr, "wanopt pki: bad certificate name '%s'\n", name);
		return 2;
	}
	snprintf(path, sizeof path, "%s/%s.crt", o->dir, name);
	if (!o->force && stat(path, &st) == 0) {
		fprintf(stderr, "wanopt pki: %s exists (use --force to replace it)\n", path);
		return 1;
	}
	if (pki_load_ca(o->dir, &ca, &ca_key) == 0 &&
	    pki_leaf(o, name, o->san ? o->san : name, ca, ca_key) == 0) {
		printf("wrote %s/%s.crt and %s/%s.key\n", o->dir, name, o->dir, name);
		rc = 0;
	}
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	return rc;
}

/* The --help text. */
static void pki_usage(FILE *f)
{
	fprintf(f,
		"usage: wanopt pki init DIR [--force] [--days=N] [--key=ec|ed25519]\n"
		"                           [--edge-san=LIST] [--core-san=LIST] [--ca-name=NAME]\n"
		"       wanopt pki issue DIR NAME [--san=LIST] [--days=N] [--key=ec|ed25519] [--force]\n\n"
		"init creates a private CA and certificates for one edge/core pair:\n"
		"DIR/ca.crt, DIR/ca.key, DIR/edge.crt, DIR/edge.key, DIR/core.crt, DIR/core.key\n"
		"(keys mode 0600).  Point tls_ca, tls_cert and tls_key at them.  It refuses to\n"
		"replace an existing CA unless --force.  issue adds DIR/NAME.crt and .key signed\n"
		"by DIR/ca.key (e.g. for a second branch).  Leaf certificates are valid for TLS\n"
		"client and server authentication.\n\n"
		"  --days=N          validity (default 3650)\n"
		"  --key=TYPE        ec (P-256, default) or ed25519\n"
		"  --edge-san=LIST   names/IPs of the edge (default wanopt-edge)\n"
		"  --core-san=LIST   names/IPs of the core (default wanopt-core,localhost,127.0.0.1,::1);\n"
		"                    wanopt-core, the name edges check, is always added\n"
		"  --san=LIST        names/IPs for `issue` (default NAME); a certificate for a core\n"
		"                    must include wanopt-core\n"
		"  --ca-name=NAME    the CA's common name (default \"wanopt CA\")\n");
}

/* Parses options into o; 0, 2 on usage errors, -1 after --help. */
static int pki_opts(int argc, char **argv, struct pki_opts *o)
{
	static const struct option lo[] = {
		{ "force", no_argument, NULL, 'f' }, { "days", required_argument, NULL, 'd' },
		{ "key", required_argument, NULL, 'k' }, { "edge-san", required_argument, NULL, 'e' },
		{ "core-san", required_argument, NULL, 'c' }, { "ca-name", required_argument, NULL, 'n' },
		{ "san", required_argument, NULL, 's' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct pki_opts){ .days = 3650, .edge_san = "wanopt-edge",
				.core_san = "wanopt-core,localhost,127.0.0.1,::1", .ca_name = "wanopt CA" };
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'f': o->force = 1; break;
		case 'd': {
			unsigned long d;
			const char *e = conf_uint_parse(optarg, 1, 36500, &d);
			if (e)
				return fprintf(stderr, "wanopt pki: --days=%s: %s\n", optarg, e), 2;
			o->days = (long)d;
			break;
		}
		case 'k':
			if (strcmp(optarg, "ec") && strcmp(optarg, "ed25519"))
				return fprintf(stderr, "wanopt pki: --key: ec or ed25519\n"), 2;
			o->ed25519 = !strcmp(optarg, "ed25519");
			break;
		case 'e': o->edge_san = optarg; break;
		case 'c': o->core_san = optarg; break;
		case 'n': o->ca_name = optarg; break;
		case 's': o->san = optarg; break;
		case 'h': pki_usage(stdout); return -1;
		default: pki_usage(stderr); return 2;
		}
	}
	if (o->days < 1 || o->days > 36500)
		return fprintf(stderr, "wanopt pki: --days: 1 to 36500\n"), 2;
	if (pki_san_check("edge-san", o->edge_san) || pki_san_check("core-san", o->core_san) ||
	    (o->san && pki_san_check("san", o->san)))
		return 2;
	return 0;
}

/* Says what is wrong with the n words left after the options (cmd the
 * first, NULL when none); returns 2. */
static int pki_bad_words(const char *cmd, int n)
{
	if (!n)
		pki_usage(stderr);
	else if (strcmp(cmd, "init") && strcmp(cmd, "issue"))
		fprintf(stderr, "wanopt pki: unknown command '%s' (init or issue; see wanopt pki --help)\n", cmd);
	else
		fprintf(stderr, "wanopt pki %s: expected %s, got %d argument%s (see wanopt pki --help)\n", cmd,
			strcmp(cmd, "init") ? "DIR NAME" : "DIR", n - 1, n == 2 ? "" : "s");
	return 2;
}

/* `wanopt pki init|issue`: 0 written, 1 refused or failed, 2 usage error. */
int px_cmd_pki(int argc, char **argv)
{
	struct pki_opts o;
	int rc;

	optind = 1;
	if ((rc = pki_opts(argc, argv, &o)) != 0)
		return rc < 0 ? 0 : rc;
	if (argc - optind == 2 && !strcmp(argv[optind], "init")) {
		o.dir = argv[optind + 1];
		return pki_init(&o);
	}
	if (argc - optind == 3 && !strcmp(argv[optind], "issue")) {
		o.dir = argv[optind + 1];
		return pki_issue(&o, argv[optind + 2]);
	}
	return pki_bad_words(argv[optind], argc - optind);
}
