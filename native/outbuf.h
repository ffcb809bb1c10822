/* A growable output buffer for the C JSON writers (live_json.c, page_scan.c).
 *
 * It allocates with PyMem_RawRealloc and sets no Python error, so it can be used without the GIL; on
 * failure ob_reserve returns -1 and sets nomem, and the caller raises MemoryError once it holds the GIL.
 * Writers reserve the room a record needs first, then append without further checks. */
#ifndef AMQTOOL_OUTBUF_H
#define AMQTOOL_OUTBUF_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *p;
    size_t n, cap;
    int nomem;
} outbuf;

static inline int ob_reserve(outbuf *o, size_t more) {
    if (o->n + more <= o->cap)
        return 0;
    size_t cap = o->cap ? o->cap : 1 << 16;
    while (cap < o->n + more)
        cap *= 2;
    char *p = PyMem_RawRealloc(o->p, cap);
    if (p == NULL) {
        o->nomem = 1;
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static inline void ob_put(outbuf *o, const char *s, size_t n) {
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

#define OB_LIT(o, s) ob_put((o), (s), sizeof(s) - 1)

/* A signed decimal, as Python's str(int) writes it. */
static inline void ob_int(outbuf *o, long long v) {
    char tmp[24];
    int k = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[k++] = '-';
    while (k)
        o->p[o->n++] = tmp[--k];
}

/* primitives.b64url (Base64.getUrlEncoder: URL-safe alphabet, padded) of n bytes, appended; failures are
 * sticky in o->nomem. Shared by the export's columns and its JSON Lines writer. */
static inline void ob_b64url(outbuf *o, const unsigned char *s, Py_ssize_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    if (o->nomem || ob_reserve(o, (size_t)((n + 2) / 3) * 4) < 0)
        return;
    char *d = o->p + o->n;
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *d++ = A[v >> 18];
        *d++ = A[(v >> 12) & 63];
        *d++ = A[(v >> 6) & 63];
        *d++ = A[v & 63];
    }
    if (n - i >= 1) {
        uint32_t v = (uint32_t)s[i] << 16 | (n - i == 2 ? (uint32_t)s[i + 1] << 8 : 0);
        *d++ = A[v >> 18];
        *d++ = A[(v >> 12) & 63];
        *d++ = n - i == 2 ? A[(v >> 6) & 63] : '=';
        *d++ = '=';
    }
    o->n = (size_t)(d - o->p);
}

#endif
