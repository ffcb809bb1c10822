/* A growable output buffer for the C JSON writers (live_json.c, page_scan.c).
 *
 * It allocates with PyMem_RawRealloc and sets no Python error, so it can be used without the GIL; on
 * failure ob_reserve returns -1 and sets nomem, and the caller raises MemoryError once it holds the GIL.
 * Writers reserve the room a record needs first, then append without further checks. */
#ifndef AMQTOOL_OUTBUF_H
#define AMQTOOL_OUTBUF_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

#endif
