/* The ActiveMQ LevelDB store's record log (RecordLog.scala; leveldb-format in amqtool.formats.leveldb.recordlog):
 * one pass over a log file's bytes giving what `verify` and the recovery need, as compact results rather than
 * a Python object per record.
 *
 *   '*' (0x2A) | kind (int8) | checksum (int32 BE, java.util.zip.CRC32 of data) | length (uint32 BE) | data
 *
 * leveldb_scan(buf, base) -> (records, stop, data, events, complete)
 *   records   the number of whole records before the stop;
 *   stop      None when the records reach the end of buf exactly, else (offset, reason, byte, length):
 *             reason 1 a zero header (the preallocated zero fill), 2 a byte that is not '*', 3 a header
 *             running past the end, 4 a record's data running past the end; byte the first header byte,
 *             length the header's length (reason 4);
 *   data      (offsets, lengths, ok): DATA records (kind 5), as packed native int64 / uint32 / uint8 arrays;
 *   events    a list, in file order, of (offset, code, kind, length, a, b):
 *             code 1 a CRC-32 mismatch (a = stored checksum as unsigned, b = computed);
 *             code 2 a UOW_END (8-byte data) naming another start (a) than its unit's (b, a log position);
 *             code 3 a record that fails its kind's quick shape check (recordlog.shape_ok: Python looks
 *             closer);
 *   complete  (offset, scan end, records cut): LogReader.verifyAndGetEndOffset as recordlog.complete_end
 *             gives it for a file whose first byte is at log position base.
 *
 * amqtool.formats.leveldb.recordlog.scan_file is the reference implementation; tests/native/
 * test_leveldb_native.py holds the two identical on every test store, damaged copies and mutated logs.
 * CRC-32 (zlib's polynomial) folds 64 bytes at a time with PCLMULQDQ when the CPU has it (the constants are
 * the published ones of Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ", as in
 * zlib-ng and Linux), bytes by table otherwise; checked against zlib.crc32 by the tests.
 */
#include "amqnative.h"

#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* --- CRC-32 -------------------------------------------------------------------------------------- */

static uint32_t crc_table[8][256];
static int crc_ready;
static int crc_clmul = -1;

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int k = 1; k < 8; k++) {
            c = crc_table[0][c & 0xff] ^ (c >> 8);
            crc_table[k][n] = c;
        }
    }
#ifdef HAVE_X86
    __builtin_cpu_init();
    crc_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1") ? 1 : 0;
#else
    crc_clmul = 0;
#endif
    crc_ready = 1;
}

/* state: the inverted CRC register (crc32(x) = ~state at the end) */
static uint32_t crc_bytes(uint32_t c, const unsigned char *p, size_t n) {
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#ifdef HAVE_X86
/* n >= 64 and a multiple of 16; c the inverted register, as crc_bytes */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_fold(uint32_t c, const unsigned char *p, size_t n) {
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL);
    const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;

    x1 = _mm_loadu_si128((const __m128i *)(p + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(p + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(p + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(p + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
    x0 = k1k2;
    p += 64;
    n -= 64;
    while (n >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        y5 = _mm_loadu_si128((const __m128i *)(p + 0x00));
        y6 = _mm_loadu_si128((const __m128i *)(p + 0x10));
        y7 = _mm_loadu_si128((const __m128i *)(p + 0x20));
        y8 = _mm_loadu_si128((const __m128i *)(p + 0x30));
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
        p += 64;
        n -= 64;
    }
    /* fold the four lanes into one */
    x0 = k3k4;
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    while (n >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)p);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        p += 16;
        n -= 16;
    }
    /* 128 -> 64 bits */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    /* 64 -> 32 bits */
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, mask32);
    x1 = _mm_clmulepi64_si128(x1, k5, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    /* Barrett reduction */
    x2 = _mm_and_si128(x1, mask32);
    x2 = _mm_clmulepi64_si128(x2, poly, 0x10);
    x2 = _mm_and_si128(x2, mask32);
    x2 = _mm_clmulepi64_si128(x2, poly, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* java.util.zip.CRC32 / zlib.crc32 of p[0:n], continuing from crc (a finished value, 0 to start) */
static uint32_t crc32_of(uint32_t crc, const unsigned char *p, size_t n) {
    if (!crc_ready)
        crc_init();
    uint32_t c = ~crc;
#ifdef HAVE_X86
    if (crc_clmul && n >= 64) {
        size_t chunk = n & ~(size_t)15;
        c = crc_fold(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
#endif
    return ~crc_bytes(c, p, n);
}

PyObject *amq_crc32(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long value = 0;
    if (!PyArg_ParseTuple(args, "y*|k:crc32", &view, &value))
        return NULL;
    uint32_t r;
    Py_BEGIN_ALLOW_THREADS
    r = crc32_of((uint32_t)value, view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(r);
}

/* --- hawtbuf's mergeUnframed, as records.hawtbuf_fields ----------------------------------------- */

/* A varint as protobuf.read_varint reads it: at most 10 bytes. *big: bits past the 64th were set. */
static int varint(const unsigned char *p, size_t end, size_t *pos, uint64_t *v, int *big) {
    uint64_t r = 0;
    int shift = 0, b64 = 0;
    for (;;) {
        if (*pos >= end)
            return -1; /* runs past the end */
        unsigned c = p[(*pos)++];
        uint64_t bits = c & 0x7f;
        if (shift < 64) {
            r |= bits << shift;
            if (shift > 57 && (bits >> (64 - shift)))
                b64 = 1;
        } else if (bits) {
            b64 = 1;
        }
        if (!(c & 0x80))
            break;
        shift += 7;
        if (shift >= 70)
            return -2; /* longer than 10 bytes */
    }
    *v = r;
    if (big)
        *big = b64;
    return 0;
}

/* Parse as hawtbuf_fields does. seen: bit f set when field f (1..6) is present at depth 0 with the wire
 * type the known map gives (varint_mask / bytes_mask); last[f] its last varint value. -1 where hawtbuf throws. */
static int hawtbuf(const unsigned char *p, size_t end, unsigned varint_mask, unsigned bytes_mask,
                   unsigned *seen, uint64_t last[8]) {
    size_t pos = 0;
    int depth = 0;
    *seen = 0;
    while (pos < end) {
        uint64_t tag;
        int big;
        if (varint(p, end, &pos, &tag, &big))
            return -1;
        unsigned wt = tag & 7;
        if (wt == 4) {
            if (depth == 0)
                return 0;
            depth--;
            continue;
        }
        if (tag == 0 && !big)
            return -1;
        uint64_t field = big ? UINT64_MAX : tag >> 3;
        if (wt == 0) {
            uint64_t v;
            if (varint(p, end, &pos, &v, NULL))
                return -1;
            if (depth == 0 && field < 8 && (varint_mask >> field & 1)) {
                *seen |= 1u << field;
                last[field] = v;
            }
        } else if (wt == 1) {
            if (pos + 8 > end)
                return -1;
            pos += 8;
        } else if (wt == 2) {
            uint64_t n;
            int nbig;
            if (varint(p, end, &pos, &n, &nbig))
                return -1;
            if (nbig || n > end - pos)
                return -1;
            if (depth == 0 && field < 8 && (bytes_mask >> field & 1))
                *seen |= 1u << field;
            pos += n;
        } else if (wt == 3) {
            depth++;
        } else if (wt == 5) {
            if (pos + 4 > end)
                return -1;
            pos += 4;
        } else {
            return -1;
        }
    }
    return depth ? -1 : 0;
}

enum { ADD_COLLECTION = 1, REMOVE_COLLECTION = 2, ADD_ENTRY = 3, REMOVE_ENTRY = 4, DATA = 5, TRACE = 6,
       UPDATE_ENTRY = 7, UOW_END = -1 };

static int message_shaped(const unsigned char *d, size_t n) {
    return n >= 5 && (int64_t)(int32_t)((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3]) ==
                         (int64_t)n - 4;
}

/* recordlog.shape_ok: does the record's data look like what its kind says? */
static int shape_ok(int kind, const unsigned char *d, size_t n) {
    unsigned seen;
    uint64_t last[8] = {0};
    switch (kind) {
    case DATA:
        return message_shaped(d, n);
    case ADD_ENTRY:
    case UPDATE_ENTRY:
    case REMOVE_ENTRY:
        if (hawtbuf(d, n, (1u << 1) | (1u << 3) | (1u << 4), (1u << 2) | (1u << 5) | (1u << 6), &seen, last))
            return 0;
        return (seen & 6) == 6;
    case ADD_COLLECTION: {
        if (hawtbuf(d, n, (1u << 1) | (1u << 2), 1u << 3, &seen, last))
            return 0;
        int32_t type = (seen & 4) ? (int32_t)(uint32_t)last[2] : 0;
        return type >= 1 && type <= 4;
    }
    case REMOVE_COLLECTION:
        return n > 0 && n <= 10 && d[n - 1] < 0x80;
    case UOW_END:
        return n == 8;
    case TRACE:
        return 1;
    default:
        return message_shaped(d, n);
    }
}

/* --- the scan ------------------------------------------------------------------------------------ */

typedef struct {
    char *p;
    size_t len, cap;
} Grow;

static int grow_put(Grow *g, const void *v, size_t n) {
    if (g->len + n > g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 4096;
        while (cap < g->len + n)
            cap *= 2;
        char *q = realloc(g->p, cap);
        if (!q)
            return -1;
        g->p = q;
        g->cap = cap;
    }
    memcpy(g->p + g->len, v, n);
    g->len += n;
    return 0;
}

typedef struct {
    int64_t offset, a, b, length;
    int32_t code, kind;
} Event;

static inline uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

PyObject *amq_leveldb_scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    long long base;
    if (!PyArg_ParseTuple(args, "y*L:leveldb_scan", &view, &base))
        return NULL;
    const unsigned char *b = view.buf;
    size_t n = (size_t)view.len;
    Grow offs = {0}, lens = {0}, oks = {0}, evs = {0};
    int64_t records = 0;
    int stop_reason = 0, stop_byte = 0, failed = 0;
    int64_t stop_off = -1;
    uint32_t stop_len = 0;
    /* complete_end's walk */
    int64_t uow_start = base, cend = -1, cscan = -1, ccut = 0;
    int64_t unit = base;
    size_t pos = 0;

    if (!crc_ready)
        crc_init();
    Py_BEGIN_ALLOW_THREADS
    while (pos < n) {
        if (pos + 10 > n) {
            int zero = 1;
            for (size_t i = pos; i < n; i++)
                if (b[i]) {
                    zero = 0;
                    break;
                }
            stop_off = (int64_t)pos;
            stop_reason = zero ? 1 : 3;
            stop_byte = b[pos];
            break;
        }
        const unsigned char *h = b + pos;
        int kind = (int8_t)h[1];
        uint32_t cs = be32(h + 2), length = be32(h + 6);
        if (h[0] != 0x2A) {
            int zero = !h[0] && !h[1] && !cs && !length;
            stop_off = (int64_t)pos;
            stop_reason = zero ? 1 : 2;
            stop_byte = h[0];
            break;
        }
        size_t end = pos + 10 + (size_t)length;
        if (end > n) {
            stop_off = (int64_t)pos;
            stop_reason = 4;
            stop_byte = h[0];
            stop_len = length;
            break;
        }
        const unsigned char *d = h + 10;
        uint32_t got = crc32_of(0, d, length);
        int ok = got == cs;
        records++;
        if (!ok) {
            Event e = {(int64_t)pos, cs, got, length, 1, kind};
            if (grow_put(&evs, &e, sizeof e)) {
                failed = 1;
                break;
            }
        }
        if (cend < 0) {
            if (!ok) {
                cend = uow_start - base;
                cscan = (int64_t)pos;
            } else {
                ccut++;
                if (kind == UOW_END && length == 8) {
                    int64_t start = (int64_t)((uint64_t)be32(d) << 32 | be32(d + 4));
                    if (start != uow_start) {
                        cend = uow_start - base;
                        cscan = (int64_t)pos;
                    } else {
                        uow_start = base + (int64_t)end;
                        ccut = 0;
                    }
                }
            }
        }
        if (kind == UOW_END && length == 8) {
            int64_t start = (int64_t)((uint64_t)be32(d) << 32 | be32(d + 4));
            if (start != unit) {
                Event e = {(int64_t)pos, start, unit, 8, 2, kind};
                if (grow_put(&evs, &e, sizeof e)) {
                    failed = 1;
                    break;
                }
            }
            unit = base + (int64_t)end;
        } else {
            if (!shape_ok(kind, d, length)) {
                Event e = {(int64_t)pos, 0, 0, length, 3, kind};
                if (grow_put(&evs, &e, sizeof e)) {
                    failed = 1;
                    break;
                }
            }
            if (kind == DATA) {
                int64_t o = (int64_t)pos;
                unsigned char f = (unsigned char)ok;
                if (grow_put(&offs, &o, 8) || grow_put(&lens, &length, 4) || grow_put(&oks, &f, 1)) {
                    failed = 1;
                    break;
                }
            }
        }
        pos = end;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *res = NULL;
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    if (cend < 0) {
        cend = uow_start - base;
        cscan = stop_off >= 0 ? stop_off : (int64_t)n;
    }
    PyObject *stop;
    if (stop_off >= 0)
        stop = Py_BuildValue("(LiiI)", (long long)stop_off, stop_reason, stop_byte, stop_len);
    else
        stop = (Py_INCREF(Py_None), Py_None);
    PyObject *events = PyList_New((Py_ssize_t)(evs.len / sizeof(Event)));
    if (!stop || !events) {
        Py_XDECREF(stop);
        Py_XDECREF(events);
        goto done;
    }
    for (size_t i = 0; i < evs.len / sizeof(Event); i++) {
        Event *e = (Event *)evs.p + i;
        PyObject *t = Py_BuildValue("(LiiLLL)", (long long)e->offset, e->code, e->kind, (long long)e->length,
                                    (long long)e->a, (long long)e->b);
        if (!t) {
            Py_DECREF(stop);
            Py_DECREF(events);
            goto done;
        }
        PyList_SET_ITEM(events, (Py_ssize_t)i, t);
    }
    res = Py_BuildValue("(LN(y#y#y#)N(LLL))", (long long)records, stop, offs.p ? offs.p : "", (Py_ssize_t)offs.len,
                        lens.p ? lens.p : "", (Py_ssize_t)lens.len, oks.p ? oks.p : "", (Py_ssize_t)oks.len, events,
                        (long long)cend, (long long)cscan, (long long)ccut);
done:
    free(offs.p);
    free(lens.p);
    free(oks.p);
    free(evs.p);
    return res;
}

/* UOW_END records ('*', 0xFF, length 8) whose CRC-32 matches, at any byte of buf[start:end] (verify's
 * count of complete units after the break of the last file's chain: searched past any framing). */
PyObject *amq_leveldb_count_uow_ends(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "y*nn:leveldb_count_uow_ends", &view, &start, &stop))
        return NULL;
    const unsigned char *b = view.buf;
    size_t end = (size_t)(stop < 0 ? 0 : stop < view.len ? stop : view.len);
    size_t pos = start < 0 ? 0 : (size_t)start;
    long long count = 0;
    if (!crc_ready)
        crc_init();
    Py_BEGIN_ALLOW_THREADS
    while (pos + 18 <= end) {
        const unsigned char *q = memchr(b + pos, 0x2A, end - 18 + 1 - pos);
        if (!q)
            break;
        pos = (size_t)(q - b);
        if (q[1] == 0xFF && be32(q + 6) == 8 && crc32_of(0, q + 10, 8) == be32(q + 2))
            count++;
        pos++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(count);
}

/* --- the index's entries (records.entry_rows is the reference) ------------------------------------ */

/* leveldb_entry_rows(items) -> (seqs, locations, lengths, status): items a list of (entry key, value) of one
 * collection, as load groups them; packed native int64 / int64 / int32 / uint8 arrays. status 0: an 8-byte
 * entry key and a value of only fields 3 and 4 (value_location, value_length: varints of at most 10 bytes,
 * the last of each winning, as decode_index_entry reads them); 1: not an 8-byte key (no message); 2: any
 * other value (meta, other fields, damage): Python decodes it (decode_index_entry). */
PyObject *amq_leveldb_entry_rows(PyObject *self, PyObject *args) {
    PyObject *items;
    if (!PyArg_ParseTuple(args, "O!:leveldb_entry_rows", &PyList_Type, &items))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    PyObject *seqs = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *locs = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *lens = PyBytes_FromStringAndSize(NULL, n * 4);
    PyObject *status = PyBytes_FromStringAndSize(NULL, n);
    if (!seqs || !locs || !lens || !status)
        goto fail;
    int64_t *sq = (int64_t *)PyBytes_AS_STRING(seqs), *lc = (int64_t *)PyBytes_AS_STRING(locs);
    int32_t *ln = (int32_t *)PyBytes_AS_STRING(lens);
    unsigned char *stt = (unsigned char *)PyBytes_AS_STRING(status);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        sq[i] = lc[i] = 0;
        ln[i] = 0;
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(it, 0)) ||
            !PyBytes_Check(PyTuple_GET_ITEM(it, 1))) {
            PyErr_SetString(PyExc_TypeError, "leveldb_entry_rows: items must be (bytes, bytes) tuples");
            goto fail;
        }
        PyObject *k = PyTuple_GET_ITEM(it, 0), *v = PyTuple_GET_ITEM(it, 1);
        if (PyBytes_GET_SIZE(k) != 8) {
            stt[i] = 1;
            continue;
        }
        const unsigned char *kb = (const unsigned char *)PyBytes_AS_STRING(k);
        sq[i] = (int64_t)((uint64_t)be32(kb) << 32 | be32(kb + 4));
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(v);
        size_t end = (size_t)PyBytes_GET_SIZE(v), pos = 0;
        int st = 0;
        while (pos < end) {
            unsigned tag = p[pos++];
            uint64_t x;
            int big;
            if ((tag != 0x18 && tag != 0x20) || varint(p, end, &pos, &x, &big) || big) {
                st = 2;
                break;
            }
            if (tag == 0x18)
                lc[i] = (int64_t)x;
            else
                ln[i] = (int32_t)(uint32_t)x;
        }
        if (st) {
            lc[i] = 0;
            ln[i] = 0;
        }
        stt[i] = (unsigned char)st;
    }
    return Py_BuildValue("(NNNN)", seqs, locs, lens, status);
fail:
    Py_XDECREF(seqs);
    Py_XDECREF(locs);
    Py_XDECREF(lens);
    Py_XDECREF(status);
    return NULL;
}

/* --- the index's write-ahead log (dblog.iter_batch, applied as index.read_index applies it) ------------ */

/* leveldb_apply_batch(batch, newest) -> (operations applied, error message or None), or None when the
 * sequence numbers would pass 64 bits (Python applies that batch). Each operation of the LevelDB write batch
 * (WriteBatch: sequence fixed64, count fixed32, then tag 1 key value / tag 0 key, lengths as varints) is
 * applied to newest (key -> (sequence, kind, value)) when no newer sequence holds the key; an error stops
 * the batch where iter_batch raises, after the operations before it. */
static const char *varint_error(int rc) {
    return rc == -2 ? "varint longer than 10 bytes" : "varint runs past the end of its message";
}

/* One write batch applied to newest: 0 done (msg empty, or the error that stopped it after the operations
 * before it), 1 the sequence numbers would pass 64 bits (nothing applied: Python applies it), -1 a Python
 * error. *ops counts the operations applied. */
static int apply_one(const unsigned char *p, size_t n, PyObject *newest, long long *ops, char *msg, size_t msgsz) {
    size_t pos = 12;
    msg[0] = 0;
    if (n < 12) {
        snprintf(msg, msgsz, "write batch of %zu bytes, shorter than its 12-byte header", n);
        return 0;
    }
    uint64_t seq = 0;
    uint32_t count = 0;
    for (int i = 7; i >= 0; i--)
        seq = seq << 8 | p[i];
    for (int i = 3; i >= 0; i--)
        count = count << 8 | p[8 + i];
    if (count && seq > UINT64_MAX - count)
        return 1;
    for (uint32_t i = 0; i < count; i++) {
        if (pos >= n) {
            snprintf(msg, msgsz, "write batch says %u operations, holds %u", count, i);
            return 0;
        }
        unsigned tag = p[pos++];
        uint64_t klen, vlen = 0;
        int big = 0, rc;
        if ((rc = varint(p, n, &pos, &klen, &big))) {
            snprintf(msg, msgsz, "%s", varint_error(rc));
            return 0;
        }
        if (big || klen > n - pos) {
            snprintf(msg, msgsz, "write batch key runs past the end");
            return 0;
        }
        size_t kpos = pos;
        pos += klen;
        PyObject *value;
        int kind;
        if (tag == 1) {
            if ((rc = varint(p, n, &pos, &vlen, &big))) {
                snprintf(msg, msgsz, "%s", varint_error(rc));
                return 0;
            }
            if (big || vlen > n - pos) {
                snprintf(msg, msgsz, "write batch value runs past the end");
                return 0;
            }
            value = PyBytes_FromStringAndSize((const char *)p + pos, (Py_ssize_t)vlen);
            pos += vlen;
            kind = 1;
        } else if (tag == 0) {
            value = (Py_INCREF(Py_None), Py_None);
            kind = 0;
        } else {
            snprintf(msg, msgsz, "write batch operation tag %u", tag);
            return 0;
        }
        PyObject *key = PyBytes_FromStringAndSize((const char *)p + kpos, (Py_ssize_t)klen);
        PyObject *sq = PyLong_FromUnsignedLongLong(seq + i);
        if (!value || !key || !sq) {
            Py_XDECREF(value);
            Py_XDECREF(key);
            Py_XDECREF(sq);
            return -1;
        }
        PyObject *old = PyDict_GetItemWithError(newest, key);
        int put = 1;
        if (old) {
            if (!PyTuple_Check(old) || PyTuple_GET_SIZE(old) < 1) {
                PyErr_SetString(PyExc_TypeError, "leveldb_apply_batch: newest values are (sequence, kind, value)");
                put = -1;
            } else {
                put = PyObject_RichCompareBool(sq, PyTuple_GET_ITEM(old, 0), Py_GE);
            }
        } else if (PyErr_Occurred()) {
            put = -1;
        }
        if (put > 0) {
            PyObject *t = Py_BuildValue("(NiN)", sq, kind, value);
            sq = value = NULL;
            if (!t || PyDict_SetItem(newest, key, t)) {
                Py_XDECREF(t);
                put = -1;
            } else {
                Py_DECREF(t);
            }
        }
        Py_XDECREF(sq);
        Py_XDECREF(value);
        Py_DECREF(key);
        if (put < 0)
            return -1;
        (*ops)++;
    }
    if (pos != n)
        snprintf(msg, msgsz, "write batch: %zu bytes after its %u operations", n - pos, count);
    return 0;
}

PyObject *amq_leveldb_apply_batch(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *newest;
    if (!PyArg_ParseTuple(args, "y*O!:leveldb_apply_batch", &view, &PyDict_Type, &newest))
        return NULL;
    long long ops = 0;
    char msg[160];
    int rc = apply_one(view.buf, (size_t)view.len, newest, &ops, msg, sizeof msg);
    PyBuffer_Release(&view);
    if (rc < 0)
        return NULL;
    if (rc > 0)
        Py_RETURN_NONE;
    return msg[0] ? Py_BuildValue("(Ls)", ops, msg) : Py_BuildValue("(LO)", ops, Py_None);
}

/* leveldb_apply_log(records, newest) -> (operations applied, [(offset, error)], records done): the write
 * batches of records ([(offset, bytes)], a log's read) applied in order as leveldb_apply_batch applies each;
 * it stops before a batch whose sequence numbers would pass 64 bits (records done < len(records): Python
 * applies the rest one by one). */
PyObject *amq_leveldb_apply_log(PyObject *self, PyObject *args) {
    PyObject *records, *newest;
    if (!PyArg_ParseTuple(args, "O!O!:leveldb_apply_log", &PyList_Type, &records, &PyDict_Type, &newest))
        return NULL;
    PyObject *errors = PyList_New(0);
    if (!errors)
        return NULL;
    long long ops = 0;
    Py_ssize_t i, nr = PyList_GET_SIZE(records);
    char msg[160];
    for (i = 0; i < nr; i++) {
        PyObject *t = PyList_GET_ITEM(records, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(t, 1))) {
            PyErr_SetString(PyExc_TypeError, "leveldb_apply_log: records are (offset, bytes) tuples");
            goto fail;
        }
        PyObject *rec = PyTuple_GET_ITEM(t, 1);
        int rc = apply_one((const unsigned char *)PyBytes_AS_STRING(rec), (size_t)PyBytes_GET_SIZE(rec), newest, &ops,
                           msg, sizeof msg);
        if (rc < 0)
            goto fail;
        if (rc > 0)
            break;
        if (msg[0]) {
            PyObject *e = Py_BuildValue("(Os)", PyTuple_GET_ITEM(t, 0), msg);
            if (!e || PyList_Append(errors, e)) {
                Py_XDECREF(e);
                goto fail;
            }
            Py_DECREF(e);
        }
    }
    return Py_BuildValue("(LNn)", ops, errors, i);
fail:
    Py_DECREF(errors);
    return NULL;
}

/* --- the index's entries against the log's DATA records (logfiles.match_data is the reference) ---------- */

typedef struct {
    int64_t base;
    const int64_t *offs;
    const uint32_t *lens;
    const unsigned char *oks;
    size_t n;
} DataRun;

/* leveldb_match_data(locations, lengths, scans, last_position, limit) -> int64 indices (packed, ascending):
 * locations and lengths packed int64 arrays of the entries verify wants, scans a list of (base, data
 * offsets, data lengths, data ok) per log file in position order (bases ascending; FileScan's arrays:
 * int64 / uint32 / uint8, offsets ascending within the file). An entry is listed when no DATA record of its file starts at
 * its location, or that record's length differs from the entry's, or its CRC-32 failed, or (last_position
 * >= 0) it lies in the last file and runs past limit. The last file holding a record at the location is the
 * one read (damaged files may overlap). One binary search per entry in the common case, nothing per record. */
PyObject *amq_leveldb_match_data(PyObject *self, PyObject *args) {
    Py_buffer lv, nv;
    PyObject *scans;
    long long last_pos, limit;
    if (!PyArg_ParseTuple(args, "y*y*O!LL:leveldb_match_data", &lv, &nv, &PyList_Type, &scans, &last_pos, &limit))
        return NULL;
    PyObject *res = NULL;
    Py_ssize_t nf = PyList_GET_SIZE(scans);
    DataRun *runs = calloc((size_t)(nf ? nf : 1), sizeof *runs);
    Py_buffer *views = calloc((size_t)(nf ? nf : 1) * 3, sizeof *views);
    Py_ssize_t got = 0;
    Grow out = {0};
    if (!runs || !views) {
        PyErr_NoMemory();
        goto done;
    }
    if (lv.len % 8 || nv.len != lv.len) {
        PyErr_SetString(PyExc_ValueError, "leveldb_match_data: locations and lengths must be int64 arrays of one size");
        goto done;
    }
    for (; got < nf; got++) {
        PyObject *t = PyList_GET_ITEM(scans, got);
        long long base;
        if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "Ly*y*y*", &base, &views[3 * got], &views[3 * got + 1],
                                                   &views[3 * got + 2])) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "leveldb_match_data: scans are (base, offsets, lengths, ok) tuples");
            goto done;
        }
        size_t n = (size_t)views[3 * got + 2].len;
        if ((size_t)views[3 * got].len != n * 8 || (size_t)views[3 * got + 1].len != n * 4) {
            got++;
            PyErr_SetString(PyExc_ValueError, "leveldb_match_data: a scan's offsets, lengths and ok differ in size");
            goto done;
        }
        runs[got] = (DataRun){base, views[3 * got].buf, views[3 * got + 1].buf, views[3 * got + 2].buf, n};
    }
    const int64_t *locs = lv.buf, *lens = nv.buf;
    size_t nw = (size_t)lv.len / 8;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < nw && !failed; i++) {
        int64_t loc = locs[i], len = lens[i];
        int bad = 1;
        /* the file holding loc: the last whose base <= loc */
        Py_ssize_t lo = 0, hi = nf;
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (runs[mid].base <= loc)
                lo = mid + 1;
            else
                hi = mid;
        }
        /* from that file back: the last file holding a record at loc wins (files may overlap when damaged) */
        for (Py_ssize_t j = lo - 1; j >= 0; j--) {
            const DataRun *r = &runs[j];
            int64_t off = loc - r->base;
            size_t a = 0, b = r->n;
            while (a < b) {
                size_t mid = (a + b) / 2;
                if (r->offs[mid] < off)
                    a = mid + 1;
                else
                    b = mid;
            }
            if (a < r->n && r->offs[a] == off) {
                bad = !((int64_t)r->lens[a] == len && r->oks[a]);
                break;
            }
        }
        if (!bad && last_pos >= 0 && loc >= last_pos && loc + 10 + len > limit)
            bad = 1;
        if (bad) {
            int64_t k = (int64_t)i;
            if (grow_put(&out, &k, 8))
                failed = 1;
        }
    }
    Py_END_ALLOW_THREADS
    if (failed)
        PyErr_NoMemory();
    else
        res = PyBytes_FromStringAndSize(out.p ? out.p : "", (Py_ssize_t)out.len);
done:
    for (Py_ssize_t i = 0; i < got * 3; i++)
        if (views[i].obj || views[i].buf)
            PyBuffer_Release(&views[i]);
    free(views);
    free(runs);
    free(out.p);
    PyBuffer_Release(&lv);
    PyBuffer_Release(&nv);
    return res;
}

/* --- the index's keys grouped as the load reads them (load.index_groups is the reference) --------------- */

typedef struct {
    uint64_t hi, lo; /* the key's bytes 1..8 and 9..16 as big-endian numbers (zero-padded): compared first */
    const unsigned char *p;
    Py_ssize_t n;
    PyObject *key, *value;
} KeyRef;

static uint64_t be64_padded(const unsigned char *p, Py_ssize_t n) {
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < 8; i++)
        v = v << 8 | (i < n ? p[i] : 0);
    return v;
}

/* bytes order (memcmp, then the shorter first) of keys sharing their first byte */
static int keyref_cmp(const void *a, const void *b) {
    const KeyRef *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    Py_ssize_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, (size_t)n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* leveldb_index_groups(index) -> (entries, collections): index a dict of bytes -> bytes; entries
 * {collection key: [(entry key, value)]} of the keys 'e' + 8-byte collection key + entry key, collections
 * and entries each in byte order of their keys (the order of a sorted(index)); collections the 9-byte 'c'
 * keys, sorted. Keys that are not bytes are a TypeError (Python groups them). */
PyObject *amq_leveldb_index_groups(PyObject *self, PyObject *args) {
    PyObject *index;
    if (!PyArg_ParseTuple(args, "O!:leveldb_index_groups", &PyDict_Type, &index))
        return NULL;
    Py_ssize_t n = PyDict_GET_SIZE(index), ne = 0, nc = 0, pos = 0;
    KeyRef *es = PyMem_Malloc(sizeof(KeyRef) * (size_t)(n ? n : 1));
    KeyRef *cs = PyMem_Malloc(sizeof(KeyRef) * (size_t)(n ? n : 1));
    PyObject *entries = NULL, *colls = NULL, *res = NULL, *k, *v;
    if (!es || !cs) {
        PyErr_NoMemory();
        goto done;
    }
    while (PyDict_Next(index, &pos, &k, &v)) {
        if (!PyBytes_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "leveldb_index_groups: index keys must be bytes");
            goto done;
        }
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(k);
        Py_ssize_t len = PyBytes_GET_SIZE(k);
        if (len >= 9 && p[0] == 'e')
            es[ne++] = (KeyRef){be64_padded(p + 1, 8), be64_padded(p + 9, len - 9), p, len, k, v};
        else if (len == 9 && p[0] == 'c')
            cs[nc++] = (KeyRef){be64_padded(p + 1, 8), 0, p, len, k, v};
    }
    qsort(es, (size_t)ne, sizeof(KeyRef), keyref_cmp);
    qsort(cs, (size_t)nc, sizeof(KeyRef), keyref_cmp);
    entries = PyDict_New();
    colls = PyList_New(nc);
    if (!entries || !colls)
        goto done;
    for (Py_ssize_t i = 0; i < nc; i++) {
        Py_INCREF(cs[i].key);
        PyList_SET_ITEM(colls, i, cs[i].key);
    }
    for (Py_ssize_t i = 0; i < ne;) {
        Py_ssize_t j = i + 1;
        while (j < ne && es[j].hi == es[i].hi)
            j++;
        PyObject *group = PyList_New(j - i);
        int64_t ck = (int64_t)((uint64_t)be32(es[i].p + 1) << 32 | be32(es[i].p + 5));
        PyObject *ckey = PyLong_FromLongLong((long long)ck);
        if (!group || !ckey) {
            Py_XDECREF(group);
            Py_XDECREF(ckey);
            goto done;
        }
        for (Py_ssize_t m = i; m < j; m++) {
            PyObject *ek = PyBytes_FromStringAndSize((const char *)es[m].p + 9, es[m].n - 9);
            PyObject *t = ek ? PyTuple_New(2) : NULL;
            if (!t) {
                Py_XDECREF(ek);
                Py_DECREF(group);
                Py_DECREF(ckey);
                goto done;
            }
            Py_INCREF(es[m].value);
            PyTuple_SET_ITEM(t, 0, ek);
            PyTuple_SET_ITEM(t, 1, es[m].value);
            PyList_SET_ITEM(group, m - i, t);
        }
        int rc = PyDict_SetItem(entries, ckey, group);
        Py_DECREF(group);
        Py_DECREF(ckey);
        if (rc)
            goto done;
        i = j;
    }
    res = PyTuple_Pack(2, entries, colls);
done:
    Py_XDECREF(entries);
    Py_XDECREF(colls);
    PyMem_Free(es);
    PyMem_Free(cs);
    return res;
}

/* leveldb_live(newest, data) -> the highest sequence of newest (0 when empty): newest key -> (sequence, kind,
 * value) as leveldb_apply_batch leaves it; every key whose newest entry is a value (kind 1) is put in data
 * with that value (bytes keys and values; None when one is not: index.live, the reference, converts). */
PyObject *amq_leveldb_live(PyObject *self, PyObject *args) {
    PyObject *newest, *data, *k, *v;
    if (!PyArg_ParseTuple(args, "O!O!:leveldb_live", &PyDict_Type, &newest, &PyDict_Type, &data))
        return NULL;
    Py_ssize_t pos = 0;
    PyObject *best = NULL;
    /* checked first: nothing is put in data unless every entry has the shape the C apply leaves */
    while (PyDict_Next(newest, &pos, &k, &v)) {
        if (!PyBytes_CheckExact(k) || !PyTuple_CheckExact(v) || PyTuple_GET_SIZE(v) != 3 ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(v, 0)) || !PyLong_CheckExact(PyTuple_GET_ITEM(v, 1)) ||
            (PyTuple_GET_ITEM(v, 2) != Py_None && !PyBytes_CheckExact(PyTuple_GET_ITEM(v, 2))))
            Py_RETURN_NONE;
    }
    pos = 0;
    while (PyDict_Next(newest, &pos, &k, &v)) {
        PyObject *seq = PyTuple_GET_ITEM(v, 0), *value = PyTuple_GET_ITEM(v, 2);
        if (!best) {
            best = seq;
        } else {
            int gt = PyObject_RichCompareBool(seq, best, Py_GT);
            if (gt < 0)
                return NULL;
            if (gt)
                best = seq;
        }
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(v, 1));
        if (kind == -1 && PyErr_Occurred())
            return NULL;
        if (kind == 1 && value != Py_None && PyDict_SetItem(data, k, value))
            return NULL;
    }
    if (!best)
        return PyLong_FromLong(0);
    Py_INCREF(best);
    return best;
}

/* --- the index's write-ahead log (dblog.read_log is the reference) --------------------------------------- */

static uint32_t crc32c_table[256];
static int crc32c_ready, crc32c_hw;

static void crc32c_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0x82F63B78u ^ (c >> 1) : c >> 1;
        crc32c_table[n] = c;
    }
#ifdef HAVE_X86
    __builtin_cpu_init();
    crc32c_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    crc32c_ready = 1;
}

#ifdef HAVE_X86
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw_run(uint32_t c, const unsigned char *p, size_t n) {
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

/* CRC-32C (Castagnoli) of p[0:n] continuing the inverted register c */
static uint32_t crc32c_run(uint32_t c, const unsigned char *p, size_t n) {
#ifdef HAVE_X86
    if (crc32c_hw)
        return crc32c_hw_run(c, p, n);
#endif
    while (n--)
        c = crc32c_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

/* leveldb_read_log(buf) -> [(offset, record bytes)], or None: the logical records of a LevelDB log file
 * (32 KiB blocks of physical records: masked CRC-32C LE, length LE16, type, data; FULL, or FIRST MIDDLE*
 * LAST) when the file reads cleanly: every record's checksum good, every fragment in order, nothing torn at
 * the end. None as soon as anything else is met: dblog.read_log (the reference) then reads the file and
 * reports what it finds. */
PyObject *amq_leveldb_read_log(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*:leveldb_read_log", &view))
        return NULL;
    if (!crc32c_ready)
        crc32c_init();
    const unsigned char *b = view.buf;
    size_t n = (size_t)view.len, pos = 0;
    PyObject *out = PyList_New(0);
    Grow pending = {0};
    int64_t pending_at = -1;
    int clean = 1;
    if (!out)
        goto fail;
    while (pos < n) {
        size_t left = 32768 - pos % 32768;
        if (left < 7) {
            pos += left;
            continue;
        }
        if (pos + 7 > n) {
            for (size_t i = pos; i < n; i++)
                if (b[i])
                    clean = 0; /* a torn tail */
            break;
        }
        uint32_t masked = (uint32_t)b[pos] | (uint32_t)b[pos + 1] << 8 | (uint32_t)b[pos + 2] << 16 |
                          (uint32_t)b[pos + 3] << 24;
        size_t length = (size_t)b[pos + 4] | (size_t)b[pos + 5] << 8;
        unsigned type = b[pos + 6];
        if (masked == 0 && length == 0 && type == 0) {
            pos += left; /* zero fill: the rest of the block */
            continue;
        }
        if (7 + length > left || pos + 7 + length > n) {
            clean = 0;
            break;
        }
        uint32_t crc = ~crc32c_run(~0u, b + pos + 6, 1 + length);
        uint32_t want = ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
        if (want != masked) {
            clean = 0;
            break;
        }
        const unsigned char *d = b + pos + 7;
        if (type == 1) { /* FULL */
            if (pending_at >= 0) {
                clean = 0;
                break;
            }
            PyObject *t = Py_BuildValue("(Ly#)", (long long)pos, (const char *)d, (Py_ssize_t)length);
            if (!t || PyList_Append(out, t)) {
                Py_XDECREF(t);
                goto fail;
            }
            Py_DECREF(t);
        } else if (type == 2) { /* FIRST */
            if (pending_at >= 0) { /* the reference drops the unfinished one silently: not the clean path */
                clean = 0;
                break;
            }
            pending.len = 0;
            pending_at = (int64_t)pos;
            if (grow_put(&pending, d, length)) {
                PyErr_NoMemory();
                goto fail;
            }
        } else if (type == 3 || type == 4) { /* MIDDLE, LAST */
            if (pending_at < 0) {
                clean = 0;
                break;
            }
            if (grow_put(&pending, d, length)) {
                PyErr_NoMemory();
                goto fail;
            }
            if (type == 4) {
                PyObject *t = Py_BuildValue("(Ly#)", (long long)pending_at, pending.p ? pending.p : "",
                                            (Py_ssize_t)pending.len);
                if (!t || PyList_Append(out, t)) {
                    Py_XDECREF(t);
                    goto fail;
                }
                Py_DECREF(t);
                pending_at = -1;
                pending.len = 0;
            }
        } else {
            clean = 0;
            break;
        }
        pos += 7 + length;
    }
    if (pending_at >= 0)
        clean = 0; /* a split record cut by the end: a torn tail */
    free(pending.p);
    PyBuffer_Release(&view);
    if (!clean) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
fail:
    free(pending.p);
    PyBuffer_Release(&view);
    Py_XDECREF(out);
    return NULL;
}
