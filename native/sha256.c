/* SHA-256 for the JSON writers (live_json.c, page_scan.c), from the libcrypto the interpreter already loads
 * for hashlib, found with dlopen at first use: no build-time dependency on OpenSSL headers.
 *
 * The low-level SHA256_Init/Update/Final calls are used, not the one-shot SHA256() of OpenSSL 3, which does
 * an EVP fetch and takes a lock per call. The context is opaque here: SHA256_CTX is 112 bytes, we give it
 * 256. Without libcrypto amq_sha256_ready() is 0 and callers keep their Python path. */
#include "amqnative.h"

#include <dlfcn.h>

typedef int (*sha_init_fn)(void *ctx);
typedef int (*sha_update_fn)(void *ctx, const void *d, size_t n);
typedef int (*sha_final_fn)(unsigned char *md, void *ctx);
static sha_init_fn sha_init;
static sha_update_fn sha_update;
static sha_final_fn sha_final;
static int looked_up = 0;

int amq_sha256_ready(void) {
    if (!looked_up) {
        static const char *const names[] = {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so", NULL};
        for (int i = 0; names[i] && sha_final == NULL; i++) {
            void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
            if (h == NULL)
                continue; /* the handle stays open for the life of the process */
            sha_init = (sha_init_fn)dlsym(h, "SHA256_Init");
            sha_update = (sha_update_fn)dlsym(h, "SHA256_Update");
            sha_final = (sha_final_fn)dlsym(h, "SHA256_Final");
            if (sha_init == NULL || sha_update == NULL || sha_final == NULL)
                sha_init = NULL, sha_update = NULL, sha_final = NULL;
        }
        looked_up = 1;
    }
    return sha_final != NULL;
}

void amq_sha256(const unsigned char *d, size_t n, unsigned char md[32]) {
    _Alignas(64) unsigned char ctx[256];
    sha_init(ctx);
    sha_update(ctx, d, n);
    sha_final(md, ctx);
}
