/* fp.c: chunk fingerprints: SHA-256, with the CPU's SHA extensions
 * (sha256.c) when it has them, else through OpenSSL's EVP, one context
 * reused.  WANOPT_SHA=openssl in the environment forces OpenSSL (tests). */
#include <stdlib.h>

#include <openssl/evp.h>

#include "dre_int.h"

struct dre_fp {
	EVP_MD *md;
	EVP_MD_CTX *ctx;
	int ni; /* use sha256.c */
};

int dre_fp_accel(void)
{
	const char *force = getenv("WANOPT_SHA");
	return (!force || strcmp(force, "openssl")) && dre_sha256_accel();
}

dre_fp *dre_fp_new(void)
{
	dre_fp *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->ni = dre_fp_accel();
	if (f->ni)
		return f; /* OpenSSL is not needed (nor initialised, which costs a millisecond) */
	f->md = EVP_MD_fetch(NULL, "SHA256", NULL);
	f->ctx = EVP_MD_CTX_new();
	if (!f->md || !f->ctx) {
		dre_fp_free(f);
		return NULL;
	}
	return f;
}

void dre_fp_free(dre_fp *f)
{
	if (!f)
		return;
	EVP_MD_CTX_free(f->ctx);
	EVP_MD_free(f->md);
	free(f);
}

int dre_fp_sha256(dre_fp *f, const void *p, size_t n, uint8_t out[32])
{
	if (f->ni) {
		dre_sha256_ni(p, n, out);
		return 0;
	}
	unsigned int len = 0;
	if (!EVP_DigestInit_ex2(f->ctx, f->md, NULL) || !EVP_DigestUpdate(f->ctx, p, n) ||
	    !EVP_DigestFinal_ex(f->ctx, out, &len) || len != 32)
		return DRE_EINVAL;
	return 0;
}

int dre_fp_sha256_jobs(dre_fp *f, struct dre_sha_job *jobs, size_t n)
{
	if (f->ni) {
		dre_sha256_ni_jobs(jobs, n);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (dre_fp_sha256(f, jobs[i].p, jobs[i].n, jobs[i].out))
			return DRE_EINVAL;
	return 0;
}
