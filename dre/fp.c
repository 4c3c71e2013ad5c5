/* fp.c: chunk fingerprints: SHA-256 through OpenSSL's EVP, one context reused. */
#include <stdlib.h>

#include <openssl/evp.h>

#include "dre_int.h"

struct dre_fp {
	EVP_MD *md;
	EVP_MD_CTX *ctx;
};

dre_fp *dre_fp_new(void)
{
	dre_fp *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
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
	unsigned int len = 0;
	if (!EVP_DigestInit_ex2(f->ctx, f->md, NULL) || !EVP_DigestUpdate(f->ctx, p, n) ||
	    !EVP_DigestFinal_ex(f->ctx, out, &len) || len != 32)
		return DRE_EINVAL;
	return 0;
}
