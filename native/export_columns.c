/* The export's message columns in C, straight into Arrow buffers (amqtool.engines.export.columns).
 *
 *   message_columns(items, safe) -> (status, columns) or None
 *       items: a list of (user record type, body, large data or None, rows), one per message; safe: no
 *       bodies.  A message's columns are written `rows` times in a row (one per queue it is exported on).
 *       status: bytes, one per item: 0 when C decoded it (it is the next row of `columns`), 1 when it is
 *       left to the Python reference (amqtool.engines.export.parse.decode_message), which then also gives
 *       the error text of a body that does not decode.  None when libcrypto's SHA-256 is not available.
 *       columns: a tuple of Arrow buffers (bytes, or None for an all-valid validity bitmap) in the order
 *       columns.py assembles them.
 *
 * C covers what fills real stores: core messages (type 45, persister 1) and core large messages (type 30)
 * whose body file was read.  AMQP messages, a missing large body, a string with a lone surrogate, and any
 * doubt are Python's, so parse.py stays the one definition of every value.  The text of each value is the
 * reference's: property values as `artemis data exp` writes them (XmlDataExporterUtil.convertProperty:
 * Java toString, bytes as URL-safe base64, a null as _AMQ_NULL typed bytes, a char untyped).
 */
#include "core_codec.h"

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

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* primitives.b64url: URL-safe alphabet, padded */
static void put_b64url(outbuf *o, const unsigned char *s, Py_ssize_t n) {
    if (ob_reserve(o, (size_t)((n + 2) / 3) * 4) < 0)
        return;
    char *d = o->p + o->n;
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *d++ = B64URL[v >> 18];
        *d++ = B64URL[(v >> 12) & 63];
        *d++ = B64URL[(v >> 6) & 63];
        *d++ = B64URL[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *d++ = B64URL[v >> 18];
        *d++ = B64URL[(v >> 12) & 63];
        *d++ = '=';
        *d++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *d++ = B64URL[v >> 18];
        *d++ = B64URL[(v >> 12) & 63];
        *d++ = B64URL[(v >> 6) & 63];
        *d++ = '=';
    }
    o->n = (size_t)(d - o->p);
}

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

enum { C_ADDRESS, C_USER_ID, C_TYPE, C_PNAME, C_PTYPE, C_PVALUE, C_MVALUE, C_TEXT, C_BODY, C_SHA, NV };
enum { F_DURABLE, F_PRIORITY, F_TIMESTAMP, F_EXPIRATION, F_BODY_SIZE, F_LARGE, NF };

typedef struct {
    vcol v[NV];
    fcol f[NF];
    outbuf plist; /* int32 list offsets of typed_properties (and of the properties map) */
    Py_ssize_t nprops;
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
            PyMem_Free(m->ps);
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
    case 4: put_b64url(o, v, p->vlen); break;
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
    int *idx = m->np <= 64 ? small : PyMem_Malloc(sizeof(int) * (size_t)m->np);
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
        PyMem_Free(idx);
    return rc;
}

static void put_hex_digest(vcol *c, const unsigned char *d, Py_ssize_t n) {
    unsigned char md[32];
    amq_sha256(d, (size_t)n, md);
    char hex[64];
    static const char H[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = H[md[i] >> 4];
        hex[2 * i + 1] = H[md[i] & 15];
    }
    v_put(c, hex, 64);
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
    if (put_text(&k->v[C_TEXT], m, large) < 0)
        return -1;
    int durable = m->durable;
    int32_t priority = m->priority;
    f_push(&k->f[F_DURABLE], &durable, 1);
    f_push(&k->f[F_PRIORITY], &priority, 1);
    f_push(&k->f[F_TIMESTAMP], &m->timestamp, 1);
    f_push(&k->f[F_EXPIRATION], &m->expiration, 1);
    int64_t size = blen;
    f_push(&k->f[F_BODY_SIZE], &size, 1);
    int is_large = large;
    f_push(&k->f[F_LARGE], &is_large, 1);
    if (safe)
        v_null(&k->v[C_BODY]);
    else
        v_put(&k->v[C_BODY], body, (size_t)blen);
    put_hex_digest(&k->v[C_SHA], body, blen);
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

static void v_mark(const vcol *c, vmark *m) { *m = (vmark){c->data.n, c->offs.n, c->valid.n, c->n, c->nulls}; }
static void v_back(vcol *c, const vmark *m) {
    c->data.n = m->data;
    c->offs.n = m->offs;
    c->n = m->n;
    c->nulls = m->nulls;
    /* clear the bits past n (a later bit_set ORs into them) */
    c->valid.n = (size_t)((m->n + 7) >> 3);
    if (m->n & 7)
        c->valid.p[m->n >> 3] &= (char)((1 << (m->n & 7)) - 1);
}
static void f_mark(const fcol *c, fmark *m) { *m = (fmark){c->v.n, c->valid.n, c->n, c->nulls}; }
static void f_back(fcol *c, const fmark *m) {
    c->v.n = m->v;
    c->n = m->n;
    c->nulls = m->nulls;
    c->valid.n = (size_t)((m->n + 7) >> 3);
    if (m->n & 7)
        c->valid.p[m->n >> 3] &= (char)((1 << (m->n & 7)) - 1);
    if (c->width == 0) {
        c->v.n = (size_t)((m->n + 7) >> 3);
        if (m->n & 7)
            c->v.p[m->n >> 3] &= (char)((1 << (m->n & 7)) - 1);
    }
}

static void plist_push(cols *k) {
    if (ob_reserve(&k->plist, 4) < 0)
        return;
    int32_t o = (int32_t)k->nprops;
    memcpy(k->plist.p + k->plist.n, &o, 4);
    k->plist.n += 4;
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
    cols k;
    memset(&k, 0, sizeof k);
    for (int i = 0; i < NV; i++)
        v_init(&k.v[i]);
    static const int widths[NF] = {0, 4, 8, 8, 8, 0};
    for (int i = 0; i < NF; i++)
        k.f[i].width = widths[i];
    plist_push(&k);
    /* The bodies, the bulk of the bytes, are written straight into the bytes object handed to Arrow: its
     * size is an upper bound (each record's whole length, or its large body, times its rows), so the
     * builder never reallocates it (the check before each message keeps it so) and it is shrunk at the end. */
    size_t room = 0;
    if (!safe) {
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *t = PyList_GET_ITEM(items, i);
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4)
                continue;
            PyObject *bo = PyTuple_GET_ITEM(t, 1), *lo = PyTuple_GET_ITEM(t, 2);
            long rep = PyLong_AsLong(PyTuple_GET_ITEM(t, 3));
            if (rep < 1) {
                PyErr_Clear();
                continue;
            }
            size_t one = (PyBytes_Check(bo) ? (size_t)PyBytes_GET_SIZE(bo) : 0) +
                         (PyBytes_Check(lo) ? (size_t)PyBytes_GET_SIZE(lo) : 0);
            room += one * (size_t)rep;
        }
        if (room > INT32_MAX)
            room = INT32_MAX;
    }
    PyObject *bodies = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)room);
    if (bodies == NULL) {
        Py_DECREF(status);
        return NULL;
    }
    k.v[C_BODY].data.p = PyBytes_AS_STRING(bodies);
    k.v[C_BODY].data.cap = room;
    for (Py_ssize_t i = 0; i < count; i++) {
        st[i] = 1;
        PyObject *t = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4)
            continue;
        long utype = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
        long repeat = PyLong_AsLong(PyTuple_GET_ITEM(t, 3));
        if (repeat < 1) {
            PyErr_Clear();
            continue;
        }
        PyObject *bo = PyTuple_GET_ITEM(t, 1), *lo = PyTuple_GET_ITEM(t, 2);
        if (utype == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            continue;
        }
        if (!PyBytes_Check(bo) || (lo != Py_None && !PyBytes_Check(lo)))
            continue;
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(bo);
        Py_ssize_t blen = PyBytes_GET_SIZE(bo);
        core m;
        memset(&m, 0, sizeof m);
        int large;
        const unsigned char *body;
        Py_ssize_t body_len;
        if (utype == 45) {
            if (blen < 1 || b[0] != 1 || read_core(b, blen, &m) < 0)
                continue;
            large = 0;
            body = m.body;
            body_len = m.blen;
        } else if (utype == 30) {
            if (lo == Py_None)
                continue; /* the body file is missing: the reference sizes it from _AMQ_LARGE_SIZE */
            rd r = {b, 0, blen, 0};
            if (read_headers(&r, &m) < 0) {
                if (m.ps)
                    PyMem_Free(m.ps);
                continue;
            }
            large = 1;
            body = (const unsigned char *)PyBytes_AS_STRING(lo);
            body_len = PyBytes_GET_SIZE(lo);
        } else {
            continue;
        }
        if (!safe && (body_len * repeat > INT32_MAX - (Py_ssize_t)k.v[C_BODY].data.n ||
                      (size_t)(body_len * repeat) > k.v[C_BODY].data.cap - k.v[C_BODY].data.n)) {
            /* past int32 offsets or the room measured up front: Python's */
            if (m.ps)
                PyMem_Free(m.ps);
            continue;
        }
        vmark vm[NV];
        fmark fm[NF];
        for (int c = 0; c < NV; c++)
            v_mark(&k.v[c], &vm[c]);
        for (int c = 0; c < NF; c++)
            f_mark(&k.f[c], &fm[c]);
        Py_ssize_t props_before = k.nprops;
        size_t plist_before = k.plist.n;
        int rc = 0;
        for (long rep = 0; rep < repeat && rc == 0; rep++) {
            Py_ssize_t row_props = k.nprops;
            rc = append_message(&k, &m, body, body_len, large, safe);
            if (rc != 0)
                break;
            /* the map's values: the typed values, a null (type 0) as null */
            for (Py_ssize_t j = row_props; j < k.nprops; j++) {
                vcol *pv = &k.v[C_PVALUE], *mv = &k.v[C_MVALUE];
                int32_t s, e;
                memcpy(&s, pv->offs.p + 4 * j, 4);
                memcpy(&e, pv->offs.p + 4 * (j + 1), 4);
                const vcol *pt = &k.v[C_PTYPE];
                int32_t ts, te;
                memcpy(&ts, pt->offs.p + 4 * j, 4);
                memcpy(&te, pt->offs.p + 4 * (j + 1), 4);
                int is_null = te - ts == 5 && memcmp(pt->data.p + ts, "bytes", 5) == 0 && e - s == 9 &&
                              memcmp(pv->data.p + s, "_AMQ_NULL", 9) == 0;
                if (is_null)
                    v_null(mv);
                else
                    v_put(mv, pv->data.p + s, (size_t)(e - s));
            }
            plist_push(&k);
        }
        if (rc == 0) {
            st[i] = 0;
        } else {
            for (int c = 0; c < NV; c++)
                v_back(&k.v[c], &vm[c]);
            for (int c = 0; c < NF; c++)
                f_back(&k.f[c], &fm[c]);
            k.nprops = props_before;
            k.plist.n = plist_before;
        }
        if (m.ps)
            PyMem_Free(m.ps);
    }
    int nomem = k.plist.nomem;
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
            out = Py_BuildValue("(NNNN)", status, vs, fs, ob_bytes(&k.plist));
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
    return out;
}
