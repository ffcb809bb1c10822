/* The core-message codec pieces the C writers share (describe.c: `print --style artemis`; export_columns.c:
 * the export's Arrow columns): bounds-checked big-endian reading, SimpleString (UTF-16) to UTF-8, Java's
 * Date/Float/Double toString, and TypedProperties with the reader's HashMap iteration order. Each mirrors
 * a Python reference in amqtool.formats.artemis.primitives; the twin tests hold them equal.
 *
 * Everything is static inline: each C file includes what it uses, no symbol is shared. */
#ifndef AMQTOOL_CORE_CODEC_H
#define AMQTOOL_CORE_CODEC_H

#include "amqnative.h"
#include "outbuf.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- output helpers: failures are sticky in o->nomem ---- */

static inline void put(outbuf *o, const char *s, size_t n) {
    if (o->nomem || ob_reserve(o, n) < 0)
        return;
    ob_put(o, s, n);
}
#define PUTL(o, lit) put((o), (lit), sizeof(lit) - 1)
static inline void puts_(outbuf *o, const char *s) { put(o, s, strlen(s)); }
static inline void put_int(outbuf *o, long long v) {
    if (o->nomem || ob_reserve(o, 24) < 0)
        return;
    ob_int(o, v);
}
static inline void put_bool(outbuf *o, int v) {
    if (v)
        PUTL(o, "true");
    else
        PUTL(o, "false");
}

/* ---- bounds-checked big-endian reader: any failure sets bad ---- */

typedef struct {
    const unsigned char *p;
    Py_ssize_t pos, end;
    int bad;
} rd;

static inline int need(rd *r, Py_ssize_t n) {
    if (r->bad || n < 0 || r->pos + n > r->end) {
        r->bad = 1;
        return 0;
    }
    return 1;
}
static inline int r_u8(rd *r) {
    if (!need(r, 1))
        return 0;
    return r->p[r->pos++];
}
static inline int r_i8(rd *r) { return (int)(signed char)r_u8(r); }
static inline int r_i16(rd *r) {
    if (!need(r, 2))
        return 0;
    int v = (int16_t)((r->p[r->pos] << 8) | r->p[r->pos + 1]);
    r->pos += 2;
    return v;
}
static inline int r_u16(rd *r) {
    if (!need(r, 2))
        return 0;
    int v = (r->p[r->pos] << 8) | r->p[r->pos + 1];
    r->pos += 2;
    return v;
}
static inline int32_t be32(const unsigned char *q) {
    return (int32_t)(((uint32_t)q[0] << 24) | ((uint32_t)q[1] << 16) | ((uint32_t)q[2] << 8) | q[3]);
}
static inline int64_t be64(const unsigned char *q) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | q[i];
    return (int64_t)v;
}
static inline int32_t r_i32(rd *r) {
    if (!need(r, 4))
        return 0;
    int32_t v = be32(r->p + r->pos);
    r->pos += 4;
    return v;
}
static inline int64_t r_i64(rd *r) {
    if (!need(r, 8))
        return 0;
    int64_t v = be64(r->p + r->pos);
    r->pos += 8;
    return v;
}

/* A SimpleString's bytes (i32 length, UTF-16LE): *s and *n, or bad. */
static inline void r_ss(rd *r, const unsigned char **s, Py_ssize_t *n) {
    int32_t len = r_i32(r);
    if (r->bad)
        return;
    if (len % 2) { /* odd length: FormatError in Python */
        r->bad = 1;
        return;
    }
    if (!need(r, len))
        return;
    *s = r->p + r->pos;
    *n = len;
    r->pos += len;
}

/* UTF-16 units (little- or big-endian) as UTF-8; a lone surrogate makes the record Python's (returns -1). */
static inline int put_utf16(outbuf *o, const unsigned char *s, Py_ssize_t nbytes, int big) {
    if (o->nomem || ob_reserve(o, (size_t)nbytes * 2 + 4) < 0) /* <= 3 bytes per 2-byte unit */
        return 0;
    char *d = o->p + o->n;
    Py_ssize_t i = 0;
    while (i < nbytes) {
        unsigned c = big ? (unsigned)(s[i] << 8 | s[i + 1]) : (unsigned)(s[i] | s[i + 1] << 8);
        i += 2;
        if (c < 0x80) {
            *d++ = (char)c;
        } else if (c < 0x800) {
            *d++ = (char)(0xC0 | (c >> 6));
            *d++ = (char)(0x80 | (c & 0x3F));
        } else if (c >= 0xD800 && c <= 0xDFFF) {
            if (c >= 0xDC00 || i + 2 > nbytes)
                return -1;
            unsigned c2 = big ? (unsigned)(s[i] << 8 | s[i + 1]) : (unsigned)(s[i] | s[i + 1] << 8);
            if (c2 < 0xDC00 || c2 > 0xDFFF)
                return -1;
            i += 2;
            unsigned cp = 0x10000 + ((c - 0xD800) << 10) + (c2 - 0xDC00);
            *d++ = (char)(0xF0 | (cp >> 18));
            *d++ = (char)(0x80 | ((cp >> 12) & 0x3F));
            *d++ = (char)(0x80 | ((cp >> 6) & 0x3F));
            *d++ = (char)(0x80 | (cp & 0x3F));
        } else {
            *d++ = (char)(0xE0 | (c >> 12));
            *d++ = (char)(0x80 | ((c >> 6) & 0x3F));
            *d++ = (char)(0x80 | (c & 0x3F));
        }
    }
    o->n = (size_t)(d - o->p);
    return 0;
}

static const char HEXU[] = "0123456789ABCDEF";
static const char HEXL[] = "0123456789abcdef";

/* primitives.uuid_text: version nibble of byte 6 set to 1, variant bits of byte 8 to 10. */
static inline void put_uuid(outbuf *o, const unsigned char *raw) {
    unsigned char b[16];
    memcpy(b, raw, 16);
    b[6] = (unsigned char)((b[6] & 0x0F) | 0x10);
    b[8] = (unsigned char)((b[8] & 0x3F) | 0x80);
    char t[36];
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            t[k++] = '-';
        t[k++] = HEXL[b[i] >> 4];
        t[k++] = HEXL[b[i] & 15];
    }
    put(o, t, 36);
}

/* primitives.bytes_to_hex(data, 2): character i of the text (groups of 4 hex digits, one space between). */
static inline char hex_at(const unsigned char *b, size_t i) {
    size_t g = i / 5, j = i % 5;
    if (j == 4)
        return ' ';
    unsigned char x = b[g * 2 + j / 2];
    return HEXU[(j % 2) ? (x & 15) : (x >> 4)];
}
static inline size_t hex_len(size_t n) { return n == 0 ? 2 : 2 * n + (n + 1) / 2 - 1; }

/* bytes_to_hex, or with maxlen > 0 max_string(bytes_to_hex(...), maxlen). */
static inline void put_hex(outbuf *o, const unsigned char *b, size_t n, size_t maxlen) {
    if (n == 0) {
        PUTL(o, "[]");
        return;
    }
    size_t L = hex_len(n);
    if (o->nomem || ob_reserve(o, L + 8) < 0)
        return;
    char *d = o->p + o->n;
    if (maxlen == 0 || L < maxlen) {
        for (size_t i = 0; i < L; i++)
            *d++ = hex_at(b, i);
    } else {
        size_t h = maxlen / 2;
        for (size_t i = 0; i < h; i++)
            *d++ = hex_at(b, i);
        memcpy(d, " ... ", 5);
        d += 5;
        for (size_t i = L - h; i < L; i++)
            *d++ = hex_at(b, i);
    }
    o->n = (size_t)(d - o->p);
}

/* ---- java.util.Date.toString in UTC (primitives.java_date_text with tz None) ---- */

static inline int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static inline void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

static const char *DAYS[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *MONTHS[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* message._date: "0" for 0; returns -1 outside datetime's years 1..9999 (Python raises FormatError). */
static inline int put_date(outbuf *o, int64_t millis) {
    if (millis == 0) {
        PUTL(o, "0");
        return 0;
    }
    int64_t days = floordiv(millis, 86400000);
    if (days < -719162 || days > 2932896)
        return -1;
    int64_t ms = millis - days * 86400000;
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    int wd = (int)(((days + 3) % 7 + 7) % 7); /* 1970-01-01 was a Thursday (Mon = 0) */
    int secs = (int)(ms / 1000);
    char t[48];
    int k = snprintf(t, sizeof t, "%s %s %02u %02d:%02d:%02d UTC %lld", DAYS[wd], MONTHS[m - 1], d, secs / 3600,
                     (secs / 60) % 60, secs % 60, (long long)y);
    put(o, t, (size_t)k);
    return 0;
}

/* ---- Float/Double.toString (primitives.java_double_text / java_float_text) ---- */

/* _java_fp_text: digits (no trailing zeros) and exp10 as in 0.digits x 10^exp10. */
static inline void put_java_fp(outbuf *o, int neg, const char *digits, int nd, int exp10) {
    char t[64];
    int k = 0;
    int e = exp10 - 1;
    if (neg)
        t[k++] = '-';
    if (e >= -3 && e < 7) {
        if (e >= 0) {
            for (int i = 0; i <= e; i++)
                t[k++] = i < nd ? digits[i] : '0';
            t[k++] = '.';
            if (nd > e + 1)
                for (int i = e + 1; i < nd; i++)
                    t[k++] = digits[i];
            else
                t[k++] = '0';
        } else {
            t[k++] = '0';
            t[k++] = '.';
            for (int i = 0; i < -e - 1; i++)
                t[k++] = '0';
            for (int i = 0; i < nd; i++)
                t[k++] = digits[i];
        }
    } else {
        t[k++] = digits[0];
        t[k++] = '.';
        if (nd > 1)
            for (int i = 1; i < nd; i++)
                t[k++] = digits[i];
        else
            t[k++] = '0';
        k += snprintf(t + k, sizeof t - (size_t)k, "E%d", e);
    }
    put(o, t, (size_t)k);
}

/* The digits of "%.Ne"-style text "d.ddde+XX" (trailing zeros dropped) and exp10 = XX + 1. */
static inline int parse_e(const char *s, char *digits, int *exp10) {
    int nd = 0;
    const char *q = s;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    *exp10 = (*q == 'e' ? atoi(q + 1) : 0) + 1;
    return nd;
}

static inline int fits_double(const char *t, double a) { return strtod(t, NULL) == a; }

static inline int fits_float(const char *t, double a) {
    double x = strtod(t, NULL);
    float y = (float)x;
    if (isinf(y) && !isinf(x)) /* struct.pack('>f') raises OverflowError */
        return 0;
    return y == (float)a;
}

/* The number of significant digits of Python's repr of a (> 0), without trailing zeros; 0 when unknown.
 * Needs the GIL (PyOS_double_to_string). */
static inline int repr_digits(double a) {
    char *r = PyOS_double_to_string(a, 'r', 0, 0, NULL);
    if (r == NULL) {
        PyErr_Clear();
        return 0;
    }
    int n = 0, cnt = 0, lead = 1;
    for (const char *q = r; *q && *q != 'e'; q++) {
        if (*q < '0' || *q > '9' || (lead && *q == '0'))
            continue; /* the sign, the point, leading zeros of 0.000123 */
        lead = 0;
        cnt++;
        if (*q != '0')
            n = cnt; /* up to the last non-zero digit: "100" has one */
    }
    PyMem_Free(r);
    return n;
}

static inline int fits_at(char *t, size_t tn, int p, double a, int single) {
    snprintf(t, tn, "%.*e", p - 1, a);
    return single ? fits_float(t, a) : fits_double(t, a);
}

/* _shortest_digits: the first precision 1..top whose correctly rounded "%.{p-1}e" round-trips; when one digit
 * does, the two-digit "%.1e" instead. Found by bisection: a precision that round-trips makes every longer one
 * round-trip too (the nearest (p+1)-digit decimal is at least as near as the nearest p-digit one, which is
 * also a (p+1)-digit decimal, and the values that read back as `a` are an interval around it), so the
 * first one is where the answers turn from no to yes. Without the GIL (export's decoder) no Python is
 * called; with it (describe), a double's repr length is tried first, which is most often the answer. */
static inline void put_fp(outbuf *o, double v, int single) {
    if (isnan(v)) {
        PUTL(o, "NaN");
        return;
    }
    if (isinf(v)) {
        if (v > 0)
            PUTL(o, "Infinity");
        else
            PUTL(o, "-Infinity");
        return;
    }
    int neg = signbit(v) != 0;
    if (v == 0) {
        if (neg)
            PUTL(o, "-0.0");
        else
            PUTL(o, "0.0");
        return;
    }
    double a = fabs(v);
    int top = single ? 9 : 17;
    char t[48], digits[32];
    int lo = 1, hi = top + 1; /* no precision below lo fits; hi fits, or is top + 1 (none known to) */
    if (!single && PyGILState_Check()) {
        /* with the GIL (describe's text), Python's repr gives the answer's length at once: the shortest
         * round-tripping digits, so nothing shorter fits; it is checked like any other guess */
        int n = repr_digits(a);
        if (n >= 1 && n <= top) {
            if (fits_at(t, sizeof t, n, a, 0))
                lo = hi = n; /* nothing shorter than the shortest fits */
            else
                lo = n + 1;
        }
    }
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (fits_at(t, sizeof t, mid, a, single))
            hi = mid;
        else
            lo = mid + 1;
    }
    int prec = lo;
    if (prec > top)
        snprintf(t, sizeof t, "%.*e", top - 1, a);
    else if (prec == 1)
        snprintf(t, sizeof t, "%.1e", a);
    else
        snprintf(t, sizeof t, "%.*e", prec - 1, a);
    int exp10;
    int nd = parse_e(t, digits, &exp10);
    put_java_fp(o, neg, digits, nd, exp10);
}

/* ---- TypedProperties ---- */

typedef struct {
    const unsigned char *key;
    Py_ssize_t klen;
    uint32_t hash;
    int type;
    Py_ssize_t vpos, vlen; /* value bytes in the buffer */
} prop;

static inline uint32_t ss_hash(const unsigned char *s, Py_ssize_t n) {
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        h = 31 * h + (uint32_t)(int32_t)(signed char)s[i];
    return h;
}

/* Read a TypedProperties block (TypedProperties.read's checks). Returns the entry count (-1 for the flag-0
 * form) and fills *props (PyMem_RawMalloc-ed when n > 0, so it runs without the GIL; the caller frees with PyMem_RawFree). bad on malformed bytes. */
static inline Py_ssize_t read_props(rd *r, prop **out) {
    *out = NULL;
    if (r_u8(r) == 0)
        return r->bad ? 0 : -1;
    int32_t n = r_i32(r);
    if (r->bad)
        return 0;
    if (n < 0 || (int64_t)n * 5 > (int64_t)(r->end - r->pos)) {
        r->bad = 1;
        return 0;
    }
    if (n == 0)
        return 0;
    prop *ps = PyMem_RawMalloc(sizeof(prop) * (size_t)n);
    if (ps == NULL) {
        r->bad = 2; /* no memory: the caller raises */
        return 0;
    }
    for (int32_t i = 0; i < n; i++) {
        prop *p = &ps[i];
        p->key = NULL;
        p->klen = 0;
        r_ss(r, &p->key, &p->klen);
        p->type = r_u8(r);
        if (r->bad)
            break;
        p->vpos = r->pos;
        Py_ssize_t w;
        switch (p->type) {
        case 0: w = 0; break;
        case 2: case 3: w = 1; break;
        case 5: case 11: w = 2; break;
        case 6: case 8: w = 4; break;
        case 7: case 9: w = 8; break;
        case 4: {
            int32_t ln = r_i32(r);
            if (ln < 0)
                r->bad = 1;
            p->vpos = r->pos;
            w = ln;
            break;
        }
        case 10: {
            int32_t ln = r_i32(r);
            if (ln % 2)
                r->bad = 1;
            p->vpos = r->pos;
            w = ln;
            break;
        }
        default: r->bad = 1; w = 0;
        }
        if (!need(r, w))
            break;
        p->vlen = w;
        r->pos += w;
        p->hash = ss_hash(p->key, p->klen);
    }
    if (r->bad) {
        PyMem_RawFree(ps);
        return 0;
    }
    *out = ps;
    return n;
}

static inline int key_starts(const prop *p, const char *ascii) {
    Py_ssize_t n = (Py_ssize_t)strlen(ascii);
    if (p->klen < 2 * n)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (p->key[2 * i] != (unsigned char)ascii[i] || p->key[2 * i + 1] != 0)
            return 0;
    return 1;
}

/* Property.value_text; -1 when Python must write it (a lone surrogate). */
static inline int put_value(outbuf *o, const unsigned char *buf, const prop *p) {
    const unsigned char *v = buf + p->vpos;
    switch (p->type) {
    case 0: PUTL(o, "NULL-value"); return 0;
    case 2: put_bool(o, v[0] != 0); return 0;
    case 3: put_int(o, (signed char)v[0]); return 0;
    case 5: put_int(o, (int16_t)(v[0] << 8 | v[1])); return 0;
    case 6: put_int(o, be32(v)); return 0;
    case 7: put_int(o, be64(v)); return 0;
    case 8: {
        uint32_t bits = (uint32_t)be32(v);
        float f;
        memcpy(&f, &bits, 4);
        put_fp(o, (double)f, 1);
        return 0;
    }
    case 9: {
        uint64_t bits = (uint64_t)be64(v);
        double d;
        memcpy(&d, &bits, 8);
        put_fp(o, d, 0);
        return 0;
    }
    case 10: return put_utf16(o, v, p->vlen, 0);
    case 11: {
        unsigned c = (unsigned)(v[0] << 8 | v[1]);
        if (c >= 0xD800 && c <= 0xDFFF)
            return -1;
        return put_utf16(o, v, 2, 1);
    }
    case 4: {
        PUTL(o, "[");
        put_hex(o, v, (size_t)p->vlen, 150);
        PUTL(o, "]");
        if (key_starts(p, "_AMQ_ROUTE_TO")) {
            PUTL(o, ", bytesAsLongs[");
            Py_ssize_t nl = p->vlen / 8;
            for (Py_ssize_t i = 0; i < nl; i++) {
                if (i)
                    PUTL(o, ", ");
                put_int(o, be64(v + 8 * i));
            }
            if (p->vlen % 8) {
                if (nl)
                    PUTL(o, ", ");
                PUTL(o, "error-converting-longs=null");
            }
            PUTL(o, "]");
        }
        return 0;
    }
    }
    return -1;
}

static int cmp_order_mask;
static const prop *cmp_base;
static inline int order_cmp(const void *a, const void *b) {
    int ia = *(const int *)a, ib = *(const int *)b;
    uint32_t ha = cmp_base[ia].hash, hb = cmp_base[ib].hash;
    uint32_t ba = (ha ^ (ha >> 16)) & (uint32_t)cmp_order_mask, bb = (hb ^ (hb >> 16)) & (uint32_t)cmp_order_mask;
    if (ba != bb)
        return ba < bb ? -1 : 1;
    return ia < ib ? -1 : (ia > ib);
}


/* The reader's iteration order of a TypedProperties block (TypedProperties.reader_order): duplicates merged
 * (first position, last value, written into ps), then sorted by HashMap bucket of a table presized to the
 * next power of two >= n, ties by position. Fills idx (n entries room) and returns the distinct count. */
static inline Py_ssize_t props_reader_order(prop *ps, Py_ssize_t n, int *idx) {
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t j;
        for (j = 0; j < m; j++) {
            const prop *q = &ps[idx[j]];
            if (q->klen == ps[i].klen && memcmp(q->key, ps[i].key, (size_t)q->klen) == 0)
                break;
        }
        if (j < m) { /* duplicate: keep the position, take the value */
            prop *q = &ps[idx[j]];
            q->type = ps[i].type;
            q->vpos = ps[i].vpos;
            q->vlen = ps[i].vlen;
        } else {
            idx[m++] = (int)i;
        }
    }
    uint32_t cap = 1;
    while ((Py_ssize_t)cap < n)
        cap *= 2;
    cmp_order_mask = (int)(cap - 1);
    cmp_base = ps;
    qsort(idx, (size_t)m, sizeof(int), order_cmp);
    return m;
}

#endif
