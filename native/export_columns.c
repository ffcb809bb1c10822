/* The export's message columns in C, straight into Arrow buffers (amqtool.engines.export.columns).
 *
 *   message_columns(items, safe) -> (status, columns) or None
 *       items: a list of (user record type, body, large data or None, rows), one per message; safe: no
 *       bodies.  A message's columns are written `rows` times in a row (one per queue it is exported on).
 *       status: bytes, one per item: 0 when C decoded it (it is the next row of `columns`), 1 when it is
 *       left to the Python reference (amqtool.engines.export.parse.decode_message), which then also gives
 *       the error text of a body that does not decode.  None when libcrypto's SHA-256 is not available.
 *       columns: a tuple of Arrow buffers (bytes, or None for an all-valid validity bitmap) in the order
 *       columns.py assembles them; the last holds the int32 offsets of typed_properties, of the properties
 *       map and of the annotations map, and the annotations' validity.
 *
 * C covers what fills real stores: core messages (type 45, persister 1), core large messages (type 30) whose
 * body file was read, and AMQP messages (persisters 2, 3, 5: their sections as amqtool.formats.artemis.amqp
 * reads them).  AMQP large messages, a missing large body, a string with a lone surrogate, an AMQP encoding
 * the reference refuses or C does not cover (symbolic descriptors, a repeated section), and any doubt are
 * Python's, so parse.py stays the one definition of every value.  The text of each value is the
 * reference's: property values as `artemis data exp` writes them (XmlDataExporterUtil.convertProperty:
 * Java toString, bytes as URL-safe base64, a null as _AMQ_NULL typed bytes, a char untyped).
 */
#include "core_codec.h"

#include <stddef.h>

/* ---- Arrow column builders: data, int32 offsets and an LSB-first validity bitmap ---- */

typedef struct {
    outbuf data, offs, valid;
    Py_ssize_t n, nulls;
} vcol; /* variable width: string or binary */

typedef struct {
    outbuf v, valid;
    Py_ssize_t n, nulls;
    int width; /* bytes a value; 0: a bitmap of booleans */
} fcol;

static void bit_set(outbuf *b, Py_ssize_t i, int on) {
    if ((size_t)(i >> 3) >= b->n) {
        if (ob_reserve(b, 1) < 0)
            return;
        b->p[b->n++] = 0;
    }
    if (on)
        b->p[i >> 3] |= (char)(1 << (i & 7));
}

static void off_push(vcol *c) {
    if (ob_reserve(&c->offs, 4) < 0)
        return;
    int32_t o = (int32_t)c->data.n;
    memcpy(c->offs.p + c->offs.n, &o, 4);
    c->offs.n += 4;
}

static void v_init(vcol *c) {
    memset(c, 0, sizeof *c);
    off_push(c);
}

/* close the value whose bytes were just appended to data (or none, for a null) */
static void v_end(vcol *c, int valid) {
    bit_set(&c->valid, c->n, valid);
    if (!valid)
        c->nulls++;
    c->n++;
    off_push(c);
}

static void v_put(vcol *c, const void *s, size_t n) {
    put(&c->data, (const char *)s, n);
    v_end(c, 1);
}

static void v_null(vcol *c) { v_end(c, 0); }

static void f_push(fcol *c, const void *v, int valid) {
    if (c->width == 0) {
        bit_set(&c->v, c->n, valid && *(const int *)v);
    } else if (ob_reserve(&c->v, (size_t)c->width) == 0) {
        if (valid)
            memcpy(c->v.p + c->v.n, v, (size_t)c->width);
        else
            memset(c->v.p + c->v.n, 0, (size_t)c->width);
        c->v.n += (size_t)c->width;
    }
    bit_set(&c->valid, c->n, valid);
    if (!valid)
        c->nulls++;
    c->n++;
}

static int v_nomem(const vcol *c) { return c->data.nomem || c->offs.nomem || c->valid.nomem; }
static int f_nomem(const fcol *c) { return c->v.nomem || c->valid.nomem; }

static void ob_free(outbuf *o) {
    PyMem_RawFree(o->p);
    o->p = NULL;
}

static PyObject *ob_bytes(const outbuf *o) { return PyBytes_FromStringAndSize(o->n ? o->p : "", (Py_ssize_t)o->n); }

/* validity bitmap, or None when nothing is null (Arrow's convention) */
static PyObject *valid_obj(const outbuf *valid, Py_ssize_t nulls) {
    if (nulls == 0)
        Py_RETURN_NONE;
    return ob_bytes(valid);
}

/* ---- text helpers ---- */

/* UTF-16LE as a string value; -1 (nothing kept) on a lone surrogate */
static int v_utf16(vcol *c, const unsigned char *s, Py_ssize_t n) {
    size_t mark = c->data.n;
    if (put_utf16(&c->data, s, n, 0) < 0) {
        c->data.n = mark;
        return -1;
    }
    v_end(c, 1);
    return 0;
}

/* ---- the columns, in the order columns.py takes them ---- */

enum { C_ADDRESS, C_USER_ID, C_TYPE, C_PNAME, C_PTYPE, C_PVALUE, C_MVALUE, C_TEXT, C_BODY, C_SHA, C_PROTOCOL, C_MKEY,
       C_AKEY, C_AVALUE, NV };
enum { F_DURABLE, F_PRIORITY, F_TIMESTAMP, F_EXPIRATION, F_BODY_SIZE, F_LARGE, NF };

typedef struct {
    vcol v[NV];
    fcol f[NF];
    outbuf plist, mlist, alist; /* int32 offsets: typed_properties, the properties map, the annotations map */
    outbuf avalid;              /* the annotations map's validity (null for core messages) */
    Py_ssize_t nprops, nmap, nann, arows, anulls;
    const unsigned char *hashed; /* the body hashed last, its length and digest (put_hex_digest) */
    Py_ssize_t hashed_len;
    char hex[64];
} cols;

static const char *const TYPE_NAMES[] = {"default", "default", "object", "text", "bytes", "map", "stream"};
static const char *const PROP_TYPES[] = {"bytes", NULL, "boolean", "byte", "bytes", "short", "integer",
                                         "long", "float", "double", "simple-string", NULL};

typedef struct {
    /* a decoded message, pointing into the record's bytes */
    int apresent;
    const unsigned char *addr;
    Py_ssize_t alen;
    const unsigned char *uid;
    int mtype, durable, priority;
    int64_t expiration, timestamp;
    const unsigned char *pbuf; /* the bytes the property positions count from */
    prop *ps;
    Py_ssize_t np;
    const unsigned char *body;
    Py_ssize_t blen;
} core;

/* MessageHeaders.read (with TypedProperties.read); the address is the header's own */
static int read_headers(rd *r, core *m) {
    (void)r_i64(r);
    m->apresent = r_u8(r) != 0;
    if (m->apresent)
        r_ss(r, &m->addr, &m->alen);
    m->uid = NULL;
    if (r_u8(r) == 1 && need(r, 16)) {
        m->uid = r->p + r->pos;
        r->pos += 16;
    }
    m->mtype = r_i8(r);
    m->durable = r_u8(r) != 0;
    m->expiration = r_i64(r);
    m->timestamp = r_i64(r);
    m->priority = r_i8(r);
    m->pbuf = r->p;
    m->np = read_props(r, &m->ps);
    return r->bad ? -1 : 0;
}

/* CoreMessage.read after the persister byte: the persister's address wins over the header's */
static int read_core(const unsigned char *b, Py_ssize_t len, core *m) {
    rd r = {b, 0, len, 0};
    if (r_u8(&r) != 1)
        return -1;
    (void)r_i64(&r);
    int apresent = r_u8(&r) != 0;
    const unsigned char *addr = NULL;
    Py_ssize_t alen = 0;
    if (apresent)
        r_ss(&r, &addr, &alen);
    int32_t buf_len = r_i32(&r);
    if (r.bad || buf_len < 4 || buf_len > r.end - r.pos)
        return -1;
    rd in = {b, r.pos, r.pos + buf_len, 0};
    int32_t eob = r_i32(&in);
    int64_t body_len = (int64_t)eob - 13;
    if (in.bad || body_len < 0 || !need(&in, (Py_ssize_t)body_len))
        return -1;
    m->body = in.p + in.pos;
    m->blen = (Py_ssize_t)body_len;
    in.pos += (Py_ssize_t)body_len;
    if (read_headers(&in, m) < 0) {
        if (m->ps)
            PyMem_RawFree(m->ps);
        m->ps = NULL;
        return -1;
    }
    m->apresent = apresent;
    m->addr = addr;
    m->alen = alen;
    return 0;
}

/* the text of a TEXT message: the body's NullableSimpleString, whole (parse.core_text); -1 (Python's) on a
 * lone surrogate, which the reference replaces */
static int put_text(vcol *c, const core *m, int large) {
    if (m->mtype != 3 || large) {
        v_null(c);
        return 0;
    }
    rd r = {m->body, 0, m->blen, 0};
    if (r_u8(&r) == 0 || r.bad) {
        v_null(c);
        return 0;
    }
    const unsigned char *s = NULL;
    Py_ssize_t n = 0;
    r_ss(&r, &s, &n);
    if (r.bad || r.pos != r.end) {
        v_null(c);
        return 0;
    }
    return v_utf16(c, s, n);
}

/* One property's export text (parse.property_rows) into c; 0, or -1 when Python must write it. */
static int put_prop_value(vcol *c, const unsigned char *buf, const prop *p) {
    const unsigned char *v = buf + p->vpos;
    outbuf *o = &c->data;
    switch (p->type) {
    case 0: PUTL(o, "_AMQ_NULL"); break;
    case 4: ob_b64url(o, v, p->vlen); break;
    case 10: return v_utf16(c, v, p->vlen);
    case 11: {
        unsigned ch = (unsigned)(v[0] << 8 | v[1]);
        if (ch >= 0xD800 && ch <= 0xDFFF)
            return -1;
        if (put_utf16(o, v, 2, 1) < 0)
            return -1;
        break;
    }
    default:
        if (put_value(o, buf, p) < 0) /* numbers, booleans, floats: the same text as data print's */
            return -1;
    }
    v_end(c, 1);
    return 0;
}

static int append_props(cols *k, const core *m) {
    if (m->np > 4096) /* the duplicate merge is quadratic: huge maps are Python's */
        return -1;
    int small[64];
    int *idx = m->np <= 64 ? small : PyMem_RawMalloc(sizeof(int) * (size_t)m->np);
    if (idx == NULL)
        return -1;
    Py_ssize_t n = m->np > 0 ? props_reader_order(m->ps, m->np, idx) : 0;
    int rc = 0;
    for (Py_ssize_t j = 0; j < n && rc == 0; j++) {
        const prop *p = &m->ps[idx[j]];
        if (v_utf16(&k->v[C_PNAME], p->key, p->klen) < 0) {
            rc = -1;
            break;
        }
        const char *tn = p->type >= 0 && p->type <= 11 ? PROP_TYPES[p->type] : NULL;
        if (tn)
            v_put(&k->v[C_PTYPE], tn, strlen(tn));
        else
            v_null(&k->v[C_PTYPE]);
        if (put_prop_value(&k->v[C_PVALUE], m->pbuf, p) < 0) {
            rc = -1;
            break;
        }
        k->nprops++;
    }
    if (idx != small)
        PyMem_RawFree(idx);
    return rc;
}

/* The body's SHA-256 in hex. A message's rows (one per queue) share its body: the digest of the body
 * hashed last is kept in `k` and reused, so a message is hashed once whatever its number of queues. */
static void put_hex_digest(cols *k, const unsigned char *d, Py_ssize_t n) {
    if (!(k->hashed == d && k->hashed_len == n && d != NULL)) {
        unsigned char md[32];
        amq_sha256(d, (size_t)n, md);
        static const char H[] = "0123456789abcdef";
        for (int i = 0; i < 32; i++) {
            k->hex[2 * i] = H[md[i] >> 4];
            k->hex[2 * i + 1] = H[md[i] & 15];
        }
        k->hashed = d;
        k->hashed_len = n;
    }
    v_put(&k->v[C_SHA], k->hex, 64);
}

/* body_size, large, body (null with safe) and body_sha256 of one row */
static void put_body(cols *k, const unsigned char *body, Py_ssize_t blen, int large, int safe) {
    int64_t size = blen;
    f_push(&k->f[F_BODY_SIZE], &size, 1);
    f_push(&k->f[F_LARGE], &large, 1);
    if (safe)
        v_null(&k->v[C_BODY]);
    else
        v_put(&k->v[C_BODY], body, (size_t)blen);
    put_hex_digest(k, body, blen);
}

/* Append one message; -1 when it is Python's (the builders are rolled back by the caller). */
static int append_message(cols *k, const core *m, const unsigned char *body, Py_ssize_t blen, int large, int safe) {
    /* strings that may refuse (lone surrogates) first, so a refusal leaves little to roll back */
    if (m->apresent) {
        if (v_utf16(&k->v[C_ADDRESS], m->addr, m->alen) < 0)
            return -1;
    } else {
        v_null(&k->v[C_ADDRESS]);
    }
    if (append_props(k, m) < 0)
        return -1;
    if (m->uid) {
        outbuf *o = &k->v[C_USER_ID].data;
        put_uuid(o, m->uid);
        v_end(&k->v[C_USER_ID], 1);
    } else {
        v_null(&k->v[C_USER_ID]);
    }
    const char *tn = m->mtype >= 0 && m->mtype <= 6 ? TYPE_NAMES[m->mtype] : "default";
    v_put(&k->v[C_TYPE], tn, strlen(tn));
    v_put(&k->v[C_PROTOCOL], "core", 4);
    if (put_text(&k->v[C_TEXT], m, large) < 0)
        return -1;
    int durable = m->durable;
    int32_t priority = m->priority;
    f_push(&k->f[F_DURABLE], &durable, 1);
    f_push(&k->f[F_PRIORITY], &priority, 1);
    f_push(&k->f[F_TIMESTAMP], &m->timestamp, 1);
    f_push(&k->f[F_EXPIRATION], &m->expiration, 1);
    put_body(k, body, blen, large, safe);
    return 0;
}

typedef struct {
    size_t data, offs, valid;
    Py_ssize_t n, nulls;
} vmark;
typedef struct {
    size_t v, valid;
    Py_ssize_t n, nulls;
} fmark;

/* Cut a bitmap back to its first n bits, clearing the bits past n in the last byte (a later bit_set ORs
 * into them): how every column is rolled back when a message turns out to be Python's. */
static void bits_back(outbuf *b, Py_ssize_t n) {
    b->n = (size_t)((n + 7) >> 3);
    if (n & 7)
        b->p[n >> 3] &= (char)((1 << (n & 7)) - 1);
}

static void v_mark(const vcol *c, vmark *m) { *m = (vmark){c->data.n, c->offs.n, c->valid.n, c->n, c->nulls}; }
static void v_back(vcol *c, const vmark *m) {
    c->data.n = m->data;
    c->offs.n = m->offs;
    c->n = m->n;
    c->nulls = m->nulls;
    bits_back(&c->valid, m->n);
}
static void f_mark(const fcol *c, fmark *m) { *m = (fmark){c->v.n, c->valid.n, c->n, c->nulls}; }
static void f_back(fcol *c, const fmark *m) {
    c->v.n = m->v;
    c->n = m->n;
    c->nulls = m->nulls;
    bits_back(&c->valid, m->n);
    if (c->width == 0) /* a boolean column: its values are bits too */
        bits_back(&c->v, m->n);
}

static void list_push(outbuf *l, Py_ssize_t v) {
    if (ob_reserve(l, 4) < 0)
        return;
    int32_t o = (int32_t)v;
    memcpy(l->p + l->n, &o, 4);
    l->n += 4;
}

/* element j of a string column: its bytes, or NULL for a null */
static const char *v_at(const vcol *c, Py_ssize_t j, int32_t *len) {
    if (!((c->valid.p[j >> 3] >> (j & 7)) & 1))
        return NULL;
    int32_t s, e;
    memcpy(&s, c->offs.p + 4 * j, 4);
    memcpy(&e, c->offs.p + 4 * (j + 1), 4);
    *len = e - s;
    /* a valid value of no bytes before any bytes were written: the column's data buffer is not allocated yet,
     * and NULL would read as a null value */
    return c->data.p != NULL ? c->data.p + s : "";
}

/* The properties map of the row whose typed properties are entries [from, nprops): name -> value text, a null
 * value (a null typed bytes _AMQ_NULL, or no text) as null, a repeated name in its first place with its last
 * value (parse.property_map / _dedup). */
static int emit_map(cols *k, Py_ssize_t from) {
    Py_ssize_t n = k->nprops - from;
    if (n > 4096) /* quadratic merge: Python's */
        return -1;
    Py_ssize_t small[64];
    Py_ssize_t *last = n <= 64 ? small : PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    if (last == NULL)
        return -1;
    /* for each entry: the index of the last entry with its name, or -1 if an earlier one has it */
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t li = 0, lj = 0;
        const char *ki = v_at(&k->v[C_PNAME], from + i, &li);
        last[i] = from + i;
        for (Py_ssize_t j = 0; j < i; j++) {
            const char *kj = v_at(&k->v[C_PNAME], from + j, &lj);
            if (last[j] >= 0 && li == lj && memcmp(ki, kj, (size_t)li) == 0) {
                last[j] = from + i; /* the earlier place takes this value */
                last[i] = -1;
                break;
            }
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (last[i] < 0)
            continue;
        int32_t kl = 0, tl = 0, vl = 0;
        const char *key = v_at(&k->v[C_PNAME], from + i, &kl);
        v_put(&k->v[C_MKEY], key, (size_t)kl);
        const char *t = v_at(&k->v[C_PTYPE], last[i], &tl);
        const char *v = v_at(&k->v[C_PVALUE], last[i], &vl);
        if (v == NULL || (t != NULL && tl == 5 && memcmp(t, "bytes", 5) == 0 && vl == 9 &&
                          memcmp(v, "_AMQ_NULL", 9) == 0))
            v_null(&k->v[C_MVALUE]);
        else
            v_put(&k->v[C_MVALUE], v, (size_t)vl);
        k->nmap++;
    }
    if (last != small)
        PyMem_RawFree(last);
    return 0;
}

/* ---- AMQP messages (persisters 2, 3, 5): amqtool.formats.artemis.amqp, the reference ---- */

enum { A_NULL, A_BOOL, A_UNSIGNED, A_SIGNED, A_FLOAT, A_DOUBLE, A_CHAR, A_UUID, A_BINARY, A_STRING, A_SYMBOL,
       A_NOTEXT };

typedef struct {
    int kind;
    const char *tname;
    uint64_t u;
    int64_t i;
    double d;
    const unsigned char *s; /* binary, string, symbol, uuid: the bytes */
    Py_ssize_t n;
} aval;

/* strict UTF-8 (what bytes.decode("utf-8") accepts) */
static int utf8_ok(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned cp, min;
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (i + len > n)
            return 0;
        for (int j = 1; j < len; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

static uint64_t beu(const unsigned char *q, int w) {
    uint64_t v = 0;
    for (int i = 0; i < w; i++)
        v = v << 8 | q[i];
    return v;
}

/* One value (amqp._value); 0, or -1 on anything the reference would refuse (or that C leaves to it). */
static int amqp_value(rd *r, aval *v, int depth) {
    int code = r_u8(r);
    if (r->bad)
        return -1;
    memset(v, 0, sizeof *v);
    if (code == 0x00) {
        if (depth >= 16)
            return -1;
        aval d;
        if (amqp_value(r, &d, depth + 1) < 0)
            return -1;
        return amqp_value(r, v, depth + 1);
    }
    int w = 0;
    switch (code) {
    case 0x40: v->kind = A_NULL; v->tname = "null"; return 0;
    case 0x41: v->kind = A_BOOL; v->tname = "boolean"; v->u = 1; return 0;
    case 0x42: v->kind = A_BOOL; v->tname = "boolean"; v->u = 0; return 0;
    case 0x43: v->kind = A_UNSIGNED; v->tname = "uint"; return 0;
    case 0x44: v->kind = A_UNSIGNED; v->tname = "ulong"; return 0;
    case 0x45: v->kind = A_NOTEXT; v->tname = "list"; return 0;
    case 0x50: v->kind = A_UNSIGNED; v->tname = "ubyte"; w = 1; break;
    case 0x51: v->kind = A_SIGNED; v->tname = "byte"; w = 1; break;
    case 0x52: v->kind = A_UNSIGNED; v->tname = "uint"; w = 1; break;
    case 0x53: v->kind = A_UNSIGNED; v->tname = "ulong"; w = 1; break;
    case 0x54: v->kind = A_SIGNED; v->tname = "int"; w = 1; break;
    case 0x55: v->kind = A_SIGNED; v->tname = "long"; w = 1; break;
    case 0x56: v->kind = A_BOOL; v->tname = "boolean"; w = 1; break;
    case 0x60: v->kind = A_UNSIGNED; v->tname = "ushort"; w = 2; break;
    case 0x61: v->kind = A_SIGNED; v->tname = "short"; w = 2; break;
    case 0x70: v->kind = A_UNSIGNED; v->tname = "uint"; w = 4; break;
    case 0x71: v->kind = A_SIGNED; v->tname = "int"; w = 4; break;
    case 0x72: v->kind = A_FLOAT; v->tname = "float"; w = 4; break;
    case 0x73: v->kind = A_CHAR; v->tname = "char"; w = 4; break;
    case 0x74: v->kind = A_NOTEXT; v->tname = "decimal32"; w = 4; break;
    case 0x80: v->kind = A_UNSIGNED; v->tname = "ulong"; w = 8; break;
    case 0x81: v->kind = A_SIGNED; v->tname = "long"; w = 8; break;
    case 0x82: v->kind = A_DOUBLE; v->tname = "double"; w = 8; break;
    case 0x83: v->kind = A_SIGNED; v->tname = "timestamp"; w = 8; break;
    case 0x84: v->kind = A_NOTEXT; v->tname = "decimal64"; w = 8; break;
    case 0x94: v->kind = A_NOTEXT; v->tname = "decimal128"; w = 16; break;
    case 0x98: v->kind = A_UUID; v->tname = "uuid"; w = 16; break;
    case 0xA0: case 0xA1: case 0xA3: case 0xB0: case 0xB1: case 0xB3: {
        int sw = code < 0xB0 ? 1 : 4;
        if (!need(r, sw))
            return -1;
        uint64_t n = beu(r->p + r->pos, sw);
        r->pos += sw;
        if (n > (uint64_t)(r->end - r->pos))
            return -1;
        v->s = r->p + r->pos;
        v->n = (Py_ssize_t)n;
        r->pos += (Py_ssize_t)n;
        int t = code & 0x0F;
        if (t == 0) {
            v->kind = A_BINARY; v->tname = "binary";
        } else if (t == 1) {
            v->kind = A_STRING; v->tname = "string";
            if (!utf8_ok(v->s, v->n))
                return -1;
        } else {
            v->kind = A_SYMBOL; v->tname = "symbol";
            for (Py_ssize_t i = 0; i < v->n; i++)
                if (v->s[i] >= 0x80)
                    return -1;
        }
        return 0;
    }
    case 0xC0: case 0xD0: case 0xC1: case 0xD1: case 0xE0: case 0xF0: {
        int sw = (code & 0xF0) == 0xC0 || code == 0xE0 ? 1 : 4;
        if (!need(r, sw))
            return -1;
        uint64_t n = beu(r->p + r->pos, sw);
        r->pos += sw;
        if (n > (uint64_t)(r->end - r->pos))
            return -1;
        r->pos += (Py_ssize_t)n;
        v->kind = A_NOTEXT;
        v->tname = (code & 0x0F) == 0 ? ((code & 0xF0) >= 0xE0 ? "array" : "list") : "map";
        return 0;
    }
    default:
        return -1;
    }
    if (!need(r, w))
        return -1;
    const unsigned char *q = r->p + r->pos;
    r->pos += w;
    uint64_t u = beu(q, w);
    switch (v->kind) {
    case A_UNSIGNED: v->u = u; break;
    case A_SIGNED: v->i = w == 1 ? (int8_t)u : w == 2 ? (int16_t)u : w == 4 ? (int32_t)u : (int64_t)u; break;
    case A_BOOL: v->u = u != 0; break;
    case A_FLOAT: {
        uint32_t bits = (uint32_t)u;
        float f;
        memcpy(&f, &bits, 4);
        v->d = f;
        break;
    }
    case A_DOUBLE: memcpy(&v->d, &u, 8); break;
    case A_CHAR: v->u = u; break;
    case A_UUID: v->s = q; v->n = 16; break;
    }
    return 0;
}

/* amqp.value_text into o: 1 written, 0 null */
static int amqp_text(outbuf *o, const aval *v) {
    char t[32];
    switch (v->kind) {
    case A_BOOL:
        if (v->u)
            PUTL(o, "true");
        else
            PUTL(o, "false");
        return 1;
    case A_UNSIGNED: put(o, t, (size_t)snprintf(t, sizeof t, "%llu", (unsigned long long)v->u)); return 1;
    case A_SIGNED: put_int(o, v->i); return 1;
    case A_FLOAT: put_fp(o, v->d, 1); return 1;
    case A_DOUBLE: put_fp(o, v->d, 0); return 1;
    case A_CHAR: {
        uint32_t c = (uint32_t)v->u;
        if (c >= 0x110000 || (c >= 0xD800 && c <= 0xDFFF))
            return 0;
        char u[4];
        int n;
        if (c < 0x80) { u[0] = (char)c; n = 1; }
        else if (c < 0x800) { u[0] = (char)(0xC0 | c >> 6); u[1] = (char)(0x80 | (c & 0x3F)); n = 2; }
        else if (c < 0x10000) { u[0] = (char)(0xE0 | c >> 12); u[1] = (char)(0x80 | ((c >> 6) & 0x3F));
                                u[2] = (char)(0x80 | (c & 0x3F)); n = 3; }
        else { u[0] = (char)(0xF0 | c >> 18); u[1] = (char)(0x80 | ((c >> 12) & 0x3F));
               u[2] = (char)(0x80 | ((c >> 6) & 0x3F)); u[3] = (char)(0x80 | (c & 0x3F)); n = 4; }
        put(o, u, (size_t)n);
        return 1;
    }
    case A_UUID: {
        char h[36];
        int k = 0;
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10)
                h[k++] = '-';
            h[k++] = "0123456789abcdef"[v->s[i] >> 4];
            h[k++] = "0123456789abcdef"[v->s[i] & 15];
        }
        put(o, h, 36);
        return 1;
    }
    case A_BINARY: ob_b64url(o, v->s, v->n); return 1;
    case A_STRING: case A_SYMBOL: put(o, (const char *)v->s, (size_t)v->n); return 1;
    default: return 0; /* null, compound, decimals */
    }
}

#define AMQP_MAX_ENTRIES 4096

typedef struct {
    /* a scratch buffer of texts, and per map entry: key, type, value (offsets into it; value -1: null) */
    outbuf sc;
    Py_ssize_t n;
    struct { size_t ks, kl; const char *tname; Py_ssize_t vs, vl; } e[AMQP_MAX_ENTRIES];
} amap;

typedef struct {
    int sections_seen; /* bit per section code 0x70..0x78 */
    int has_header, durable, priority;
    int has_ctime, has_etime;
    int64_t ctime, etime;
    const unsigned char *uid;
    Py_ssize_t uidlen;
    int has_text;
    const unsigned char *text;
    Py_ssize_t textlen;
    amap *app, *ann;
} amqp_t;

/* A compound's constructor code8/code32 (list8/list32, map8/map32) and its size and count: sets *end (where
 * its elements must end) and *count. 1: read; 0: a null (0x40) or, when list0 is allowed, an empty list; -1:
 * anything else (amqp._compound's refusals). */
static int amqp_compound(rd *r, int code8, int code32, int list0, Py_ssize_t *end, uint64_t *count) {
    int code = r_u8(r);
    if (r->bad)
        return -1;
    if (code == 0x40 || (list0 && code == 0x45))
        return 0;
    if (code != code8 && code != code32)
        return -1;
    int w = code == code8 ? 1 : 4;
    if (!need(r, 2 * w))
        return -1;
    uint64_t size = beu(r->p + r->pos, w);
    r->pos += w;
    if (size > (uint64_t)(r->end - r->pos))
        return -1;
    *end = r->pos + (Py_ssize_t)size;
    *count = beu(r->p + r->pos, w);
    r->pos += w;
    return 1;
}

/* a list (the header, the properties): its first `want` elements into f (fewer if shorter); count in *nf */
static int amqp_list(rd *r, aval *f, int want, int *nf) {
    *nf = 0;
    Py_ssize_t end;
    uint64_t count;
    int rc = amqp_compound(r, 0xC0, 0xD0, 1, &end, &count);
    if (rc <= 0)
        return rc;
    for (uint64_t i = 0; i < count; i++) {
        aval v;
        if (amqp_value(r, &v, 0) < 0)
            return -1;
        if ((int)i < want) {
            f[i] = v;
            *nf = (int)i + 1;
        }
    }
    return r->pos == end ? 0 : -1;
}

/* a map section (annotations, application properties) into m: amqp._pairs */
static int amqp_map(rd *r, amap *m) {
    m->n = 0;
    m->sc.n = 0;
    Py_ssize_t end;
    uint64_t count;
    int rc = amqp_compound(r, 0xC1, 0xD1, 0, &end, &count);
    if (rc <= 0)
        return rc;
    if (count % 2 || count / 2 > AMQP_MAX_ENTRIES)
        return -1;
    for (uint64_t i = 0; i < count; i += 2) {
        aval k, v;
        if (amqp_value(r, &k, 0) < 0 || amqp_value(r, &v, 0) < 0)
            return -1;
        size_t ks = m->sc.n;
        if (!amqp_text(&m->sc, &k))
            continue; /* a key no text can name: not a column key */
        size_t kl = m->sc.n - ks;
        Py_ssize_t vs = (Py_ssize_t)m->sc.n, vl = 0;
        if (amqp_text(&m->sc, &v))
            vl = (Py_ssize_t)(m->sc.n - (size_t)vs);
        else
            vs = -1;
        m->e[m->n].ks = ks;
        m->e[m->n].kl = kl;
        m->e[m->n].tname = v.tname;
        m->e[m->n].vs = vs;
        m->e[m->n].vl = vl;
        m->n++;
    }
    if (m->sc.nomem)
        return -1;
    return r->pos == end ? 0 : -1;
}

/* amqp.decode_sections; -1: the reference's (it fails, or C does not cover it) */
static int amqp_sections(const unsigned char *d, Py_ssize_t n, amqp_t *a) {
    rd r = {d, 0, n, 0};
    while (r.pos < r.end) {
        if (r_u8(&r) != 0x00 || r.bad)
            return -1;
        aval desc;
        if (amqp_value(&r, &desc, 0) < 0 || desc.kind != A_UNSIGNED || strcmp(desc.tname, "ulong") != 0)
            return -1; /* symbolic descriptors: the reference's */
        if (desc.u < 0x70 || desc.u > 0x78)
            return -1;
        int bitno = (int)(desc.u - 0x70);
        if (a->sections_seen & (1 << bitno))
            return -1; /* a repeated section: the reference's */
        a->sections_seen |= 1 << bitno;
        switch (desc.u) {
        case 0x70: {
            aval f[3];
            int nf;
            if (amqp_list(&r, f, 3, &nf) < 0)
                return -1;
            a->has_header = 1;
            a->durable = nf > 0 && f[0].kind == A_BOOL && f[0].u;
            a->priority = nf > 1 && strcmp(f[1].tname, "ubyte") == 0 ? (int)f[1].u : 4;
            break;
        }
        case 0x73: {
            aval f[10];
            int nf;
            if (amqp_list(&r, f, 10, &nf) < 0)
                return -1;
            if (nf > 1 && f[1].kind == A_BINARY) {
                a->uid = f[1].s;
                a->uidlen = f[1].n;
            }
            if (nf > 8 && strcmp(f[8].tname, "timestamp") == 0) {
                a->has_etime = 1;
                a->etime = f[8].i;
            }
            if (nf > 9 && strcmp(f[9].tname, "timestamp") == 0) {
                a->has_ctime = 1;
                a->ctime = f[9].i;
            }
            break;
        }
        case 0x72:
            if (amqp_map(&r, a->ann) < 0)
                return -1;
            break;
        case 0x74:
            if (amqp_map(&r, a->app) < 0)
                return -1;
            break;
        case 0x77: {
            aval v;
            if (amqp_value(&r, &v, 0) < 0)
                return -1;
            if (v.kind == A_STRING) {
                a->has_text = 1;
                a->text = v.s;
                a->textlen = v.n;
            }
            break;
        }
        default: { /* delivery annotations, footer, data, sequence: skipped */
            aval v;
            if (amqp_value(&r, &v, 0) < 0)
                return -1;
        }
        }
    }
    return 0;
}

/* the annotations map of one row: the message annotations deduplicated, or null for a core message */
static int emit_annotations(cols *k, const amqp_t *a) {
    const amap *m = a->ann;
    for (Py_ssize_t i = 0; i < m->n; i++) {
        int dup = 0;
        for (Py_ssize_t j = 0; j < i; j++)
            if (m->e[j].kl == m->e[i].kl && memcmp(m->sc.p + m->e[j].ks, m->sc.p + m->e[i].ks, m->e[i].kl) == 0) {
                dup = 1;
                break;
            }
        if (dup)
            continue;
        Py_ssize_t last = i; /* the last value of this key */
        for (Py_ssize_t j = i + 1; j < m->n; j++)
            if (m->e[j].kl == m->e[i].kl && memcmp(m->sc.p + m->e[j].ks, m->sc.p + m->e[i].ks, m->e[i].kl) == 0)
                last = j;
        v_put(&k->v[C_AKEY], m->sc.p + m->e[i].ks, m->e[i].kl);
        if (m->e[last].vs < 0)
            v_null(&k->v[C_AVALUE]);
        else
            v_put(&k->v[C_AVALUE], m->sc.p + m->e[last].vs, (size_t)m->e[last].vl);
        k->nann++;
    }
    list_push(&k->alist, k->nann);
    bit_set(&k->avalid, k->arows++, 1);
    return 0;
}

/* One AMQP message row: parse.decode_message's _amqp_columns. -1: the reference's. */
static int append_amqp(cols *k, const unsigned char *b, Py_ssize_t blen, amqp_t *a, int safe) {
    rd r = {b, 0, blen, 0};
    int persister = r_u8(&r);
    (void)r_i64(&r);
    (void)r_i64(&r); /* messageID, messageFormat */
    int apresent = r_u8(&r) != 0;
    const unsigned char *addr = NULL;
    Py_ssize_t alen = 0;
    if (apresent)
        r_ss(&r, &addr, &alen);
    int32_t n = r_i32(&r);
    if (r.bad || n < 0 || !need(&r, n))
        return -1;
    const unsigned char *data = r.p + r.pos;
    r.pos += n;
    core extra;
    memset(&extra, 0, sizeof extra);
    if (persister == 3 || persister == 5) {
        int32_t extra_size = r_i32(&r);
        if (r.bad)
            return -1;
        if (extra_size != 0) {
            extra.pbuf = r.p;
            extra.np = read_props(&r, &extra.ps);
            if (r.bad) {
                if (extra.ps)
                    PyMem_RawFree(extra.ps);
                return -1;
            }
        }
    }
    int64_t stored_exp = 0;
    if (persister == 5) {
        stored_exp = r_i64(&r);
        if (r.bad) {
            if (extra.ps)
                PyMem_RawFree(extra.ps);
            return -1;
        }
    }
    memset(a, 0, offsetof(amqp_t, app));
    a->app->n = a->ann->n = 0;
    int rc = amqp_sections(data, n, a);
    if (rc == 0 && apresent && v_utf16(&k->v[C_ADDRESS], addr, alen) < 0)
        rc = -1;
    if (rc == 0 && !apresent)
        v_null(&k->v[C_ADDRESS]);
    Py_ssize_t row_props = k->nprops;
    if (rc == 0 && extra.np > 0)
        rc = append_props(k, &extra);
    if (extra.ps)
        PyMem_RawFree(extra.ps);
    if (rc < 0)
        return -1;
    (void)row_props;
    /* application properties after the broker's extra ones, typed by their AMQP type */
    const amap *m = a->app;
    for (Py_ssize_t i = 0; i < m->n; i++) {
        v_put(&k->v[C_PNAME], m->sc.p + m->e[i].ks, m->e[i].kl);
        v_put(&k->v[C_PTYPE], m->e[i].tname, strlen(m->e[i].tname));
        if (m->e[i].vs < 0)
            v_null(&k->v[C_PVALUE]);
        else
            v_put(&k->v[C_PVALUE], m->sc.p + m->e[i].vs, (size_t)m->e[i].vl);
        k->nprops++;
    }
    v_put(&k->v[C_PROTOCOL], "amqp", 4);
    if (a->uid && utf8_ok(a->uid, a->uidlen))
        v_put(&k->v[C_USER_ID], a->uid, (size_t)a->uidlen);
    else
        v_null(&k->v[C_USER_ID]);
    v_null(&k->v[C_TYPE]);
    if (a->has_text)
        v_put(&k->v[C_TEXT], a->text, (size_t)a->textlen);
    else
        v_null(&k->v[C_TEXT]);
    int durable = a->durable;
    int32_t priority = a->priority;
    f_push(&k->f[F_DURABLE], &durable, a->has_header);
    f_push(&k->f[F_PRIORITY], &priority, a->has_header);
    f_push(&k->f[F_TIMESTAMP], &a->ctime, a->has_ctime);
    if (persister == 5)
        f_push(&k->f[F_EXPIRATION], &stored_exp, 1);
    else
        f_push(&k->f[F_EXPIRATION], &a->etime, a->has_etime);
    put_body(k, data, n, 0, safe);
    return 0;
}

/* One item of message_columns' list, read under the GIL; the decode loop then runs without it (the list
 * keeps the bytes alive), so that a table's writer thread runs meanwhile. */
typedef struct {
    long utype, repeat;
    const unsigned char *b, *lo; /* the record body; the large message's body (NULL: None) */
    Py_ssize_t blen, lolen;
    int ok;
} item_t;

/* The per-item loop of message_columns: no Python object is touched (runs without the GIL). */
static void decode_items(cols *k, const item_t *items, Py_ssize_t count, char *st, amqp_t *am, int safe) {
    for (Py_ssize_t i = 0; i < count; i++) {
        st[i] = 1;
        const item_t *it = &items[i];
        if (!it->ok)
            continue;
        long utype = it->utype, repeat = it->repeat;
        const unsigned char *b = it->b;
        Py_ssize_t blen = it->blen;
        core m;
        memset(&m, 0, sizeof m);
        int large = 0, amqp = 0;
        const unsigned char *body = NULL;
        Py_ssize_t body_len;
        if (utype == 45 && blen >= 1 && (b[0] == 2 || b[0] == 3 || b[0] == 5)) {
            amqp = 1; /* decoded row by row in append_amqp; the record's length bounds its data */
            body_len = blen;
        } else if (utype == 45) {
            if (blen < 1 || b[0] != 1 || read_core(b, blen, &m) < 0)
                continue;
            large = 0;
            body = m.body;
            body_len = m.blen;
        } else if (utype == 30) {
            if (it->lo == NULL)
                continue; /* the body file is missing: the reference sizes it from _AMQ_LARGE_SIZE */
            rd r = {b, 0, blen, 0};
            if (read_headers(&r, &m) < 0) {
                if (m.ps)
                    PyMem_RawFree(m.ps);
                continue;
            }
            large = 1;
            body = it->lo;
            body_len = it->lolen;
        } else {
            continue;
        }
        if (!safe && (body_len * repeat > INT32_MAX - (Py_ssize_t)k->v[C_BODY].data.n ||
                      (size_t)(body_len * repeat) > k->v[C_BODY].data.cap - k->v[C_BODY].data.n)) {
            /* past int32 offsets or the room measured up front: Python's */
            if (m.ps)
                PyMem_RawFree(m.ps);
            continue;
        }
        vmark vm[NV];
        fmark fm[NF];
        for (int c = 0; c < NV; c++)
            v_mark(&k->v[c], &vm[c]);
        for (int c = 0; c < NF; c++)
            f_mark(&k->f[c], &fm[c]);
        Py_ssize_t props_before = k->nprops, map_before = k->nmap, ann_before = k->nann, arows_before = k->arows,
                   anulls_before = k->anulls;
        size_t plist_before = k->plist.n, mlist_before = k->mlist.n, alist_before = k->alist.n;
        int rc = 0;
        for (long rep = 0; rep < repeat && rc == 0; rep++) {
            Py_ssize_t row_props = k->nprops;
            rc = amqp ? append_amqp(k, b, blen, am, safe) : append_message(k, &m, body, body_len, large, safe);
            if (rc != 0)
                break;
            if (emit_map(k, row_props) < 0) {
                rc = -1;
                break;
            }
            if (amqp)
                rc = emit_annotations(k, am);
            else
                list_push(&k->alist, k->nann), bit_set(&k->avalid, k->arows++, 0), k->anulls++;
            if (rc != 0)
                break;
            list_push(&k->plist, k->nprops);
            list_push(&k->mlist, k->nmap);
        }
        if (rc == 0) {
            st[i] = 0;
        } else {
            for (int c = 0; c < NV; c++)
                v_back(&k->v[c], &vm[c]);
            for (int c = 0; c < NF; c++)
                f_back(&k->f[c], &fm[c]);
            k->nprops = props_before;
            k->nmap = map_before;
            k->nann = ann_before;
            k->anulls = anulls_before;
            k->plist.n = plist_before;
            k->mlist.n = mlist_before;
            k->alist.n = alist_before;
            k->arows = arows_before;
            bits_back(&k->avalid, arows_before);
        }
        if (m.ps)
            PyMem_RawFree(m.ps);
    }
}

PyObject *amq_message_columns(PyObject *self, PyObject *args) {
    PyObject *items;
    int safe;
    if (!PyArg_ParseTuple(args, "O!p", &PyList_Type, &items, &safe))
        return NULL;
    if (!amq_sha256_ready())
        Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(items);
    PyObject *status = PyBytes_FromStringAndSize(NULL, count);
    if (status == NULL)
        return NULL;
    char *st = PyBytes_AS_STRING(status);
    item_t *job = PyMem_RawMalloc(sizeof(item_t) * (size_t)(count ? count : 1));
    amap *maps = PyMem_RawMalloc(2 * sizeof(amap));
    if (job == NULL || maps == NULL) {
        Py_DECREF(status);
        PyMem_RawFree(job);
        PyMem_RawFree(maps);
        return PyErr_NoMemory();
    }
    /* The bodies, the bulk of the bytes, are written straight into the bytes object handed to Arrow: its
     * size is an upper bound (each record's whole length, or its large body, times its rows), so the
     * builder never reallocates it (the check before each message keeps it so) and it is shrunk at the end. */
    size_t room = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        item_t *it = &job[i];
        memset(it, 0, sizeof *it);
        PyObject *t = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4)
            continue;
        PyObject *bo = PyTuple_GET_ITEM(t, 1), *lo = PyTuple_GET_ITEM(t, 2);
        it->utype = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
        it->repeat = PyLong_AsLong(PyTuple_GET_ITEM(t, 3));
        if ((it->utype == -1 || it->repeat == -1) && PyErr_Occurred()) {
            PyErr_Clear();
            continue;
        }
        if (it->repeat < 1 || !PyBytes_Check(bo) || (lo != Py_None && !PyBytes_Check(lo)))
            continue;
        it->b = (const unsigned char *)PyBytes_AS_STRING(bo);
        it->blen = PyBytes_GET_SIZE(bo);
        if (lo != Py_None) {
            it->lo = (const unsigned char *)PyBytes_AS_STRING(lo);
            it->lolen = PyBytes_GET_SIZE(lo);
        }
        it->ok = 1;
        if (!safe)
            room += ((size_t)it->blen + (size_t)it->lolen) * (size_t)it->repeat;
    }
    if (room > INT32_MAX)
        room = INT32_MAX;
    PyObject *bodies = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)room);
    if (bodies == NULL) {
        Py_DECREF(status);
        PyMem_RawFree(job);
        PyMem_RawFree(maps);
        return NULL;
    }
    cols k;
    memset(&k, 0, sizeof k);
    for (int i = 0; i < NV; i++)
        v_init(&k.v[i]);
    static const int widths[NF] = {0, 4, 8, 8, 8, 0};
    for (int i = 0; i < NF; i++)
        k.f[i].width = widths[i];
    list_push(&k.plist, 0);
    list_push(&k.mlist, 0);
    list_push(&k.alist, 0);
    memset(&maps[0].sc, 0, sizeof(outbuf));
    memset(&maps[1].sc, 0, sizeof(outbuf));
    amqp_t am;
    memset(&am, 0, sizeof am);
    am.app = &maps[0];
    am.ann = &maps[1];
    k.v[C_BODY].data.p = PyBytes_AS_STRING(bodies);
    k.v[C_BODY].data.cap = room;
    Py_BEGIN_ALLOW_THREADS
    decode_items(&k, job, count, st, &am, safe);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(job);
    int nomem = k.plist.nomem | k.mlist.nomem | k.alist.nomem | k.avalid.nomem;
    for (int c = 0; c < NV; c++)
        nomem |= v_nomem(&k.v[c]);
    for (int c = 0; c < NF; c++)
        nomem |= f_nomem(&k.f[c]);
    PyObject *out = NULL;
    if (nomem) {
        PyErr_NoMemory();
    } else {
        /* per variable column: (validity or None, offsets, data); per fixed column: (validity or None, values);
         * then the list offsets */
        PyObject *vs = PyTuple_New(NV), *fs = PyTuple_New(NF);
        if (vs && fs) {
            for (int c = 0; c < NV; c++) {
                PyObject *data;
                if (c == C_BODY) {
                    data = bodies;
                    bodies = NULL;
                    if (_PyBytes_Resize(&data, (Py_ssize_t)k.v[c].data.n) < 0)
                        data = NULL;
                } else {
                    data = ob_bytes(&k.v[c].data);
                }
                PyTuple_SET_ITEM(vs, c, Py_BuildValue("(NNN)", valid_obj(&k.v[c].valid, k.v[c].nulls),
                                                      ob_bytes(&k.v[c].offs), data));
            }
            for (int c = 0; c < NF; c++)
                PyTuple_SET_ITEM(fs, c, Py_BuildValue("(NN)", valid_obj(&k.f[c].valid, k.f[c].nulls),
                                                      ob_bytes(&k.f[c].v)));
            out = Py_BuildValue("(NNN(NNNN))", status, vs, fs, ob_bytes(&k.plist), ob_bytes(&k.mlist),
                                ob_bytes(&k.alist), valid_obj(&k.avalid, k.anulls));
            status = NULL;
            vs = fs = NULL;
        }
        Py_XDECREF(vs);
        Py_XDECREF(fs);
    }
    Py_XDECREF(status);
    Py_XDECREF(bodies);
    k.v[C_BODY].data.p = NULL; /* the bytes object's storage, not ours */
    for (int c = 0; c < NV; c++) {
        ob_free(&k.v[c].data);
        ob_free(&k.v[c].offs);
        ob_free(&k.v[c].valid);
    }
    for (int c = 0; c < NF; c++) {
        ob_free(&k.f[c].v);
        ob_free(&k.f[c].valid);
    }
    ob_free(&k.plist);
    ob_free(&k.mlist);
    ob_free(&k.alist);
    ob_free(&k.avalid);
    ob_free(&maps[0].sc);
    ob_free(&maps[1].sc);
    PyMem_RawFree(maps);
    return out;
}
