/* Page files in C (artemis-journal-format.md §7.1): the record framing of PageReadWriter, the paged
 * message's fields verify and print need, and the state of each paged message against the journals
 * (amqtool.engines.paging), without a Python object per record.
 *
 * page_walk(buf, pos, number, mode, tables, acc, safe, limit) walks '{' i32 L <L bytes> '}' records from
 * `pos` (record number `number`) as PageScanner does, and per record, by mode:
 *
 *   0  framing only (PageScanner);
 *   1  verify: the fields of summarize_record (core messages skipped by their lengths, AMQP 2/3/5 read as
 *      AmqpMessage.read does) and PagingVerifier's per-record accounting into `acc`;
 *   2  print JSON: the message validated as PagedMessage.read does, and its text exactly as
 *      json.dumps(PagedEntry.to_json(safe), ensure_ascii=False) writes it (bodySha256 via libcrypto);
 *   3  export: the message validated as in mode 2; per record, packed native-endian into `text` (bytes):
 *      i32 number, i64 message start, i64 message end (the persisted message, persister byte first),
 *      i64 page transaction id, u8 its state (0 none, 1 committed, 2 prepared, 3 not found), i32 count,
 *      then that many i64 queue ids: the record's queues still to consume it (queue_state pending), in
 *      routed order (amqtool.engines.artemis.paging.export.paged_export_messages).
 *
 * Records the fast path does not cover -- core large messages (largeMessageType 1/-1), AMQP large messages
 * (persister 4), unknown persisters, any record that does not decode and any with bytes after its queue ids
 * (which no broker writes: paging/dropped_queues.py) -- are handed back: the walk stops
 * with status HANDBACK at that record and Python (the reference path) takes it, then resumes after it. So
 * error texts and the rare kinds stay in one place, and results are identical to the Python path
 * (tests/native/test_page_scan.py holds the two equal). The walk runs without the GIL (taking it back only
 * for an address not seen before and, in mode 1, for each record of a page transaction not committed), so
 * print formats two runs of records at once on two cores.
 *
 * Returns (status, pos, number, length, text):
 *   status 0..4  the framing ended: "end", "short-tail", "bad-start-marker", "bad-length", "bad-end-marker";
 *                pos = first byte not read as a record, number = records read, length = the bad record's L
 *   status 5     HANDBACK: pos/number/length of the record Python must take
 *   status 6     PAUSE: `limit` records done (mode 2 bounds the text held at once); resume at pos/number
 *   text         mode 2: the JSON of the records done ("\n  {...}" joined by ","; `acc` holds the
 *                "first" flag as acc[0]: 1 until something is written); mode 3: the packed records;
 *                else None.
 *
 * tables (modes 1, 2): (committed, prepared, qtab, acks) buffers:
 *   committed, prepared: sorted native int64 page transaction ids (PAGE_TRANSACTION records; the ones
 *                        inside prepared transactions);
 *   qtab: native int64 quadruples (queue id, flags, ack start, ack count) sorted by queue id, for this
 *         page: flags 1 = the queue exists (a QUEUE_BINDING_RECORD), 2 = page complete for this page;
 *   acks: native int32 message numbers acknowledged on this page, sorted within each queue's slice.
 * acc (mode 1): writable native int64 [messages, pendingMessages, expected per qtab entry...];
 *   mode 1 also appends page transaction ids of not-found / prepared records to the lists in acc_lists.
 */
#include "amqnative.h"
#include "outbuf.h"

#include <stdint.h>
#include <string.h>

enum { ST_END, ST_SHORT_TAIL, ST_BAD_START, ST_BAD_LENGTH, ST_BAD_END, ST_HANDBACK, ST_PAUSE };
enum { MODE_FRAME, MODE_VERIFY, MODE_JSON, MODE_EXPORT };
enum { TX_NONE, TX_COMMITTED, TX_PREPARED, TX_NOT_FOUND };
enum { Q_KNOWN = 1, Q_COMPLETE = 2 };

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4));
}

PyObject *amq_page_json_available(PyObject *self, PyObject *noargs) {
    return PyBool_FromLong(amq_sha256_ready());
}

/* --- bounded reads: every check mirrors a FormatError of the Python codec (failure = hand back) ---------- */

typedef struct {
    const unsigned char *b;
    Py_ssize_t p, end;
} rd;

#define NEED(r, n) ((n) >= 0 && (r)->p + (n) <= (r)->end)

/* Reader.simple_string: i32 length, even, then the bytes (start and length in s, n). */
static int rd_simple_string(rd *r, Py_ssize_t *s, Py_ssize_t *n) {
    if (!NEED(r, 4))
        return -1;
    int32_t k = be32(r->b + r->p);
    r->p += 4;
    if (k % 2 != 0 || !NEED(r, k))
        return -1;
    *s = r->p;
    *n = k;
    r->p += k;
    return 0;
}

/* Reader.nullable_simple_string; *s = -1 for null. */
static int rd_nullable_ss(rd *r, Py_ssize_t *s, Py_ssize_t *n) {
    if (!NEED(r, 1))
        return -1;
    if (r->b[r->p++] == 0) {
        *s = -1;
        *n = 0;
        return 0;
    }
    return rd_simple_string(r, s, n);
}

/* TypedProperties.read, values skipped. */
static int rd_typed_properties(rd *r) {
    if (!NEED(r, 1))
        return -1;
    if (r->b[r->p++] == 0)
        return 0;
    if (!NEED(r, 4))
        return -1;
    int32_t n = be32(r->b + r->p);
    r->p += 4;
    if (n < 0 || (int64_t)n * 5 > r->end - r->p)
        return -1;
    for (int32_t i = 0; i < n; i++) {
        Py_ssize_t s, k;
        if (rd_simple_string(r, &s, &k) < 0 || !NEED(r, 1))
            return -1;
        int t = r->b[r->p++];
        Py_ssize_t w;
        switch (t) {
        case 0: w = 0; break;                 /* NULL */
        case 2: case 3: w = 1; break;         /* BOOLEAN, BYTE */
        case 5: case 11: w = 2; break;        /* SHORT, CHAR */
        case 6: case 8: w = 4; break;         /* INT, FLOAT */
        case 7: case 9: w = 8; break;         /* LONG, DOUBLE */
        case 4:                               /* BYTES: i32 length (not negative) + bytes */
            if (!NEED(r, 4))
                return -1;
            w = be32(r->b + r->p);
            r->p += 4;
            if (w < 0)
                return -1;
            break;
        case 10:                              /* STRING: a SimpleString */
            if (rd_simple_string(r, &s, &k) < 0)
                return -1;
            w = 0;
            break;
        default:
            return -1;
        }
        if (!NEED(r, w))
            return -1;
        r->p += w;
    }
    return 0;
}

/* What a record yields on the fast path. */
typedef struct {
    int64_t tx_id, mid;
    int ltype;
    int persister;
    Py_ssize_t addr, addr_len;        /* persister's address (addr < 0: null) */
    Py_ssize_t body, body_len;        /* core body / AMQP data */
    Py_ssize_t hdr_addr, hdr_addr_len; /* core: the address inside the headers */
    Py_ssize_t uid;                   /* core: userID bytes, or -1 */
    Py_ssize_t hdr_start, hdr_end;    /* core: the headers+properties block */
    int64_t buf_len;                  /* core: the stored buffer length */
    Py_ssize_t qids;                  /* position of the queue ids */
    int32_t nq;
} rec_t;

/* AmqpMessage.read for persisters 2, 3, 5 (r after the persister byte). */
static int rd_amqp(rd *r, int persister, rec_t *m) {
    if (!NEED(r, 16))
        return -1;
    m->mid = be64(r->b + r->p);
    r->p += 16; /* messageID, messageFormat */
    if (rd_nullable_ss(r, &m->addr, &m->addr_len) < 0 || !NEED(r, 4))
        return -1;
    int32_t n = be32(r->b + r->p);
    r->p += 4;
    if (n < 0 || !NEED(r, n))
        return -1;
    m->body = r->p;
    m->body_len = n;
    r->p += n;
    if (persister == 3 || persister == 5) {
        if (!NEED(r, 4))
            return -1;
        int32_t extra = be32(r->b + r->p);
        r->p += 4;
        if (extra != 0 && rd_typed_properties(r) < 0)
            return -1;
    }
    if (persister == 5) {
        if (!NEED(r, 8))
            return -1;
        r->p += 8;
    }
    return 0;
}

/* CoreMessage.read (r after the persister byte). full = 0: skip the buffer by its length, as
 * summarize_record does; full = 1: decode body, headers and properties as the codec does. */
static int rd_core(rd *r, rec_t *m, int full) {
    if (!NEED(r, 8))
        return -1;
    m->mid = be64(r->b + r->p);
    r->p += 8;
    if (full) {
        if (rd_nullable_ss(r, &m->addr, &m->addr_len) < 0)
            return -1;
    } else { /* _skip_nullable_simple_string: no evenness check */
        if (!NEED(r, 1))
            return -1;
        if (r->b[r->p] == 0) {
            r->p += 1;
        } else {
            if (!NEED(r, 5))
                return -1;
            int32_t k = be32(r->b + r->p + 1);
            if (k < 0 || r->p + 5 + k > r->end)
                return -1;
            r->p += 5 + k;
        }
    }
    if (!NEED(r, 4))
        return -1;
    int32_t bl = be32(r->b + r->p);
    r->p += 4;
    if (bl < 4 || bl > r->end - r->p)
        return -1;
    m->buf_len = bl;
    Py_ssize_t inner_end = r->p + bl;
    if (full) {
        rd in = {r->b, r->p, inner_end};
        int32_t eob = be32(in.b + in.p);
        in.p += 4;
        int64_t body_len = (int64_t)eob - 13; /* BUFFER_HEADER_SPACE */
        if (body_len < 0 || !NEED(&in, body_len))
            return -1;
        m->body = in.p;
        m->body_len = (Py_ssize_t)body_len;
        in.p += body_len;
        if (!NEED(&in, 8))
            return -1;
        m->hdr_start = in.p;
        in.p += 8;
        if (rd_nullable_ss(&in, &m->hdr_addr, &m->hdr_addr_len) < 0 || !NEED(&in, 1))
            return -1;
        m->uid = -1;
        if (in.b[in.p++] == 1) {
            if (!NEED(&in, 16))
                return -1;
            m->uid = in.p;
            in.p += 16;
        }
        if (!NEED(&in, 1 + 1 + 8 + 8 + 1))
            return -1;
        in.p += 19;
        if (rd_typed_properties(&in) < 0)
            return -1;
        m->hdr_end = in.p;
    }
    r->p = inner_end;
    return 0;
}

/* The fast-path fields of the PagedMessage in b[start:end]; -1: hand the record back. */
static int read_record(const unsigned char *b, Py_ssize_t start, Py_ssize_t end, int full, rec_t *m) {
    rd r = {b, start, end};
    if (!NEED(&r, 9))
        return -1;
    m->tx_id = be64(b + start);
    m->ltype = (int8_t)b[start + 8];
    r.p += 9;
    if (m->ltype == 1 || m->ltype == -1 || !NEED(&r, 1))
        return -1; /* core large: Python (declared size, header) */
    m->persister = b[r.p++];
    m->addr = -1;
    m->addr_len = 0;
    if (m->persister == 1) {
        if (rd_core(&r, m, full) < 0)
            return -1;
    } else if (m->persister == 2 || m->persister == 3 || m->persister == 5) {
        if (rd_amqp(&r, m->persister, m) < 0)
            return -1;
    } else {
        return -1; /* AMQP large (4) or an unknown persister */
    }
    if (!NEED(&r, 4))
        return -1;
    int32_t n = be32(b + r.p);
    r.p += 4;
    /* bytes after the queue ids (the record is exactly the encode size the broker wrote): a damaged queue
     * count, judged by Python (paging/dropped_queues.py) */
    if (n < 0 || (int64_t)n * 8 != r.end - r.p)
        return -1;
    m->qids = r.p;
    m->nq = n;
    return 0;
}

/* --- the journals' tables -------------------------------------------------------------------------- */

typedef struct {
    Py_buffer committed, prepared, qtab, acks;
    int have;
} tables_t;

/* Index of v among the n sorted keys a[0], a[stride], a[2 * stride]..., or -1. */
static Py_ssize_t find64(const int64_t *a, Py_ssize_t n, Py_ssize_t stride, int64_t v) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (a[stride * mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < n && a[stride * lo] == v) ? lo : -1;
}

static int tx_state(const tables_t *t, int64_t tx) {
    if (tx < 0)
        return TX_NONE;
    if (find64(t->committed.buf, t->committed.len / 8, 1, tx) >= 0)
        return TX_COMMITTED;
    if (find64(t->prepared.buf, t->prepared.len / 8, 1, tx) >= 0)
        return TX_PREPARED;
    return TX_NOT_FOUND;
}

/* Index of queue q in qtab (rows of 4 int64s led by the queue id), or -1. */
static Py_ssize_t qfind(const tables_t *t, int64_t q) { return find64(t->qtab.buf, t->qtab.len / 32, 4, q); }

static int acked(const tables_t *t, Py_ssize_t qi, int32_t number) {
    const int64_t *e = (const int64_t *)t->qtab.buf + 4 * qi;
    const int32_t *a = (const int32_t *)t->acks.buf + e[2];
    Py_ssize_t lo = 0, hi = e[3];
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (a[mid] < number)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < e[3] && a[lo] == number;
}

/* queue_state: 0 acked, 1 page-complete, 2 no-queue, 3 pending (PagingJournalView.queue_state). */
static int queue_state(const tables_t *t, int64_t q, int32_t number) {
    Py_ssize_t qi = qfind(t, q);
    if (qi < 0)
        return 2;
    if (acked(t, qi, number))
        return 0;
    int64_t flags = ((const int64_t *)t->qtab.buf)[4 * qi + 1];
    if (flags & Q_COMPLETE)
        return 1;
    if (!(flags & Q_KNOWN))
        return 2;
    return 3;
}

static void tables_release(tables_t *t) {
    if (t->have) {
        PyBuffer_Release(&t->committed);
        PyBuffer_Release(&t->prepared);
        PyBuffer_Release(&t->qtab);
        PyBuffer_Release(&t->acks);
        t->have = 0;
    }
}

static int tables_get(PyObject *tup, tables_t *t) {
    t->have = 0;
    if (!PyTuple_Check(tup) || PyTuple_GET_SIZE(tup) != 4) {
        PyErr_SetString(PyExc_TypeError, "tables must be (committed, prepared, qtab, acks)");
        return -1;
    }
    Py_buffer *bufs[4] = {&t->committed, &t->prepared, &t->qtab, &t->acks};
    for (int i = 0; i < 4; i++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(tup, i), bufs[i], PyBUF_SIMPLE) < 0) {
            for (int j = 0; j < i; j++)
                PyBuffer_Release(bufs[j]);
            return -1;
        }
    }
    t->have = 1;
    if (t->committed.len % 8 || t->prepared.len % 8 || t->qtab.len % 32 || t->acks.len % 4) {
        tables_release(t);
        PyErr_SetString(PyExc_ValueError, "tables: sizes are not whole int64/int32 arrays");
        return -1;
    }
    return 0;
}

/* --- JSON text ------------------------------------------------------------------------------------- */

static const char hexdig[] = "0123456789abcdef";

/* The JSON of an address: json.dumps(str) of the UTF-16LE bytes, computed in Python once per distinct
 * address (escapes, non-ASCII, lone surrogates as ensure_ascii=False leaves them) and kept as UTF-8
 * (surrogatepass) bytes. */
typedef struct {
    PyObject *raw;  /* bytes of the last address seen (flag + text) */
    PyObject *json; /* its JSON text, UTF-8 bytes */
    int ascii;      /* every text written so far is ASCII */
    PyThreadState *ts; /* the walk runs without the GIL: a miss takes it back for the Python calls */
} addr_cache;

static int address_json_miss(addr_cache *c, PyObject *dumps, const unsigned char *b, Py_ssize_t s,
                             Py_ssize_t n);

static int address_json(addr_cache *c, PyObject *dumps, const unsigned char *b, Py_ssize_t s, Py_ssize_t n,
                        const char **out, Py_ssize_t *out_len) {
    if (s < 0) {
        *out = "null";
        *out_len = 4;
        return 0;
    }
    if (c->raw != NULL && PyBytes_GET_SIZE(c->raw) == n && memcmp(PyBytes_AS_STRING(c->raw), b + s, n) == 0) {
        *out = PyBytes_AS_STRING(c->json);
        *out_len = PyBytes_GET_SIZE(c->json);
        return 0;
    }
    PyEval_RestoreThread(c->ts);
    int rc = address_json_miss(c, dumps, b, s, n);
    c->ts = PyEval_SaveThread();
    if (rc < 0)
        return -1;
    *out = PyBytes_AS_STRING(c->json);
    *out_len = PyBytes_GET_SIZE(c->json);
    for (Py_ssize_t i = 0; i < *out_len; i++)
        if ((unsigned char)(*out)[i] >= 0x80)
            c->ascii = 0;
    return 0;
}

/* With the GIL: decode the address, json.dumps it, keep it as the cache's entry. */
static int address_json_miss(addr_cache *c, PyObject *dumps, const unsigned char *b, Py_ssize_t s,
                             Py_ssize_t n) {
    int order = -1; /* little-endian */
    PyObject *text = PyUnicode_DecodeUTF16((const char *)b + s, n, "surrogatepass", &order);
    if (text == NULL)
        return -1;
    PyObject *js = PyObject_CallOneArg(dumps, text);
    Py_DECREF(text);
    if (js == NULL)
        return -1;
    PyObject *utf8 = PyUnicode_AsEncodedString(js, "utf-8", "surrogatepass");
    Py_DECREF(js);
    if (utf8 == NULL)
        return -1;
    PyObject *raw = PyBytes_FromStringAndSize((const char *)b + s, n);
    if (raw == NULL) {
        Py_DECREF(utf8);
        return -1;
    }
    Py_XSETREF(c->raw, raw);
    Py_XSETREF(c->json, utf8);
    return 0;
}

static const char *const tx_json[] = {"null", "\"committed\"", "\"prepared\"", "\"not-found\""};
static const char *const q_json[] = {"\"acked\"", "\"page-complete\"", "\"no-queue\"", "\"pending\""};

/* Size of a nullable simple string as Writer writes it. */
static inline int64_t nss_size(Py_ssize_t s, Py_ssize_t n) { return s < 0 ? 1 : 5 + (int64_t)n; }

/* PagedEntry.to_json for a fast-path record (without the GIL): -1 a Python error is set, -2 no memory. */
static int record_json(outbuf *o, const unsigned char *b, const rec_t *m, const tables_t *t, int64_t page,
                       int32_t number, Py_ssize_t offset, int safe, PyObject *dumps, addr_cache *ac) {
    const char *addr;
    Py_ssize_t addr_len;
    if (address_json(ac, dumps, b, m->addr, m->addr_len, &addr, &addr_len) < 0)
        return -1;
    /* fixed text ~400 bytes, per queue ~60 */
    if (ob_reserve(o, 600 + (size_t)addr_len + 96 * (size_t)m->nq) < 0)
        return -2;
    int ts = tx_state(t, m->tx_id);
    OB_LIT(o, "{\"page\": ");
    ob_int(o, page);
    OB_LIT(o, ", \"messageNumber\": ");
    ob_int(o, number);
    OB_LIT(o, ", \"offset\": ");
    ob_int(o, offset);
    OB_LIT(o, ", \"transactionId\": ");
    ob_int(o, m->tx_id);
    OB_LIT(o, ", \"pageTransaction\": ");
    ob_put(o, tx_json[ts], strlen(tx_json[ts]));
    OB_LIT(o, ", \"messageId\": ");
    ob_int(o, m->mid);
    OB_LIT(o, ", \"address\": ");
    ob_put(o, addr, addr_len);
    OB_LIT(o, ", \"largeMessageType\": ");
    ob_int(o, m->ltype);
    OB_LIT(o, ", \"large\": false, \"queues\": [");
    const unsigned char *qp = b + m->qids;
    for (int32_t i = 0; i < m->nq; i++) {
        if (i)
            OB_LIT(o, ", ");
        ob_int(o, be64(qp + 8 * i));
    }
    OB_LIT(o, "], \"queueStates\": {");
    /* a dict: a repeated queue id keeps its first place (its state is the same) */
    int any = 0;
    for (int32_t i = 0; i < m->nq; i++) {
        int64_t q = be64(qp + 8 * i);
        int dup = 0;
        for (int32_t j = 0; j < i && !dup; j++)
            dup = be64(qp + 8 * j) == q;
        if (dup)
            continue;
        if (any)
            OB_LIT(o, ", ");
        any = 1;
        o->p[o->n++] = '"';
        ob_int(o, q);
        OB_LIT(o, "\": ");
        const char *s = q_json[queue_state(t, q, number)];
        ob_put(o, s, strlen(s));
    }
    OB_LIT(o, "}, \"pendingQueues\": [");
    any = 0;
    for (int32_t i = 0; i < m->nq; i++) {
        int64_t q = be64(qp + 8 * i);
        if (queue_state(t, q, number) != 3)
            continue;
        if (any)
            OB_LIT(o, ", ");
        any = 1;
        ob_int(o, q);
    }
    OB_LIT(o, "], \"deliverable\": ");
    if (ts == TX_NONE || ts == TX_COMMITTED)
        OB_LIT(o, "true");
    else
        OB_LIT(o, "false");
    OB_LIT(o, ", \"bodySize\": ");
    ob_int(o, m->body_len);
    OB_LIT(o, ", \"bodySha256\": \"");
    unsigned char md[32];
    amq_sha256(b + m->body, (size_t)m->body_len, md);
    for (int i = 0; i < 32; i++) {
        o->p[o->n++] = hexdig[md[i] >> 4];
        o->p[o->n++] = hexdig[md[i] & 15];
    }
    o->p[o->n++] = '"';
    if (m->persister == 1) {
        /* CoreMessage.encode_size: the stored buffer length, or, when the persister's address differs
         * from the one in the headers, the size re-encoded with the persister's address */
        int same = (m->addr < 0 && m->hdr_addr < 0) ||
                   (m->addr >= 0 && m->hdr_addr >= 0 && m->addr_len == m->hdr_addr_len &&
                    memcmp(b + m->addr, b + m->hdr_addr, m->addr_len) == 0);
        OB_LIT(o, ", \"size\": ");
        if (same)
            ob_int(o, m->buf_len);
        else /* 4 + body + the headers re-encoded with the persister's address (the tail left out) */
            ob_int(o, 4 + (int64_t)m->body_len + (m->hdr_end - m->hdr_start) -
                          nss_size(m->hdr_addr, m->hdr_addr_len) + nss_size(m->addr, m->addr_len));
    }
    if (!safe) {
        OB_LIT(o, ", \"userId\": ");
        if (m->persister == 1 && m->uid >= 0) {
            unsigned char u[16];
            memcpy(u, b + m->uid, 16);
            u[6] = (u[6] & 0x0F) | 0x10; /* uuid_text: new UUID(TYPE_TIME_BASED, bytes) */
            u[8] = (u[8] & 0x3F) | 0x80;
            o->p[o->n++] = '"';
            for (int i = 0; i < 16; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                    o->p[o->n++] = '-';
                o->p[o->n++] = hexdig[u[i] >> 4];
                o->p[o->n++] = hexdig[u[i] & 15];
            }
            o->p[o->n++] = '"';
        } else {
            OB_LIT(o, "null");
        }
    }
    o->p[o->n++] = '}';
    return 0;
}

/* --- the walk -------------------------------------------------------------------------------------- */

PyObject *amq_page_walk(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"buf", "pos", "number", "mode", "tables", "acc", "lists", "page", "safe",
                             "limit", "dumps", NULL};
    PyObject *bufobj, *tabobj = Py_None, *accobj = Py_None, *lists = Py_None, *dumps = Py_None;
    Py_ssize_t pos, limit = -1;
    int number, mode, safe = 0;
    long long page = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Onii|OOOLpnO", kwlist, &bufobj, &pos, &number, &mode,
                                     &tabobj, &accobj, &lists, &page, &safe, &limit, &dumps))
        return NULL;
    if (mode < MODE_FRAME || mode > MODE_EXPORT) {
        PyErr_SetString(PyExc_ValueError, "mode must be 0, 1, 2 or 3");
        return NULL;
    }
    if (mode == MODE_JSON && (!amq_sha256_ready() || !PyCallable_Check(dumps))) {
        PyErr_SetString(PyExc_RuntimeError, "page_walk JSON needs libcrypto's SHA256 and a dumps callable");
        return NULL;
    }
    Py_buffer view, accv;
    tables_t t = {.have = 0};
    int have_acc = 0;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    outbuf o = {NULL, 0, 0};
    addr_cache ac = {NULL, NULL, 1, NULL};
    if (mode != MODE_FRAME && tables_get(tabobj, &t) < 0)
        goto done;
    if (mode != MODE_FRAME) {
        if (PyObject_GetBuffer(accobj, &accv, PyBUF_WRITABLE) < 0)
            goto done;
        have_acc = 1;
        Py_ssize_t need = mode == MODE_VERIFY ? 2 + t.qtab.len / 32 : 1;
        if (accv.len < need * 8) {
            PyErr_SetString(PyExc_ValueError, "acc is too short");
            goto done;
        }
        if (mode == MODE_VERIFY && (!PyTuple_Check(lists) || PyTuple_GET_SIZE(lists) != 2 ||
                                    !PyList_Check(PyTuple_GET_ITEM(lists, 0)) ||
                                    !PyList_Check(PyTuple_GET_ITEM(lists, 1)))) {
            PyErr_SetString(PyExc_TypeError, "lists must be (not_found, prepared) lists");
            goto done;
        }
    }
    const unsigned char *b = view.buf;
    Py_ssize_t size = view.len;
    int64_t *acc = have_acc ? accv.buf : NULL;
    if (pos < 0 || pos > size) {
        PyErr_SetString(PyExc_ValueError, "pos outside the buffer");
        goto done;
    }
    int status = ST_END;
    int32_t length = -1;
    Py_ssize_t done_records = 0;
    int failed = 0, nomem = 0; /* a Python error is set (failed), or MemoryError is due (nomem) */
    /* The walk runs without the GIL (print formats pages in two threads); Python calls take it back. */
    ac.ts = PyEval_SaveThread();
    while (1) {
        if (size - pos < 6) {
            status = pos == size ? ST_END : ST_SHORT_TAIL;
            break;
        }
        if (b[pos] != '{') {
            status = ST_BAD_START;
            break;
        }
        int32_t len = be32(b + pos + 1);
        Py_ssize_t nxt = pos + 6 + (Py_ssize_t)len;
        if (len < 0 || nxt > size) {
            status = ST_BAD_LENGTH;
            length = len;
            break;
        }
        if (b[nxt - 1] != '}') {
            status = ST_BAD_END;
            length = len;
            break;
        }
        if (limit >= 0 && done_records >= limit) {
            status = ST_PAUSE;
            break;
        }
        if (mode != MODE_FRAME) {
            rec_t m;
            if (read_record(b, pos + 5, nxt - 1, mode == MODE_JSON || mode == MODE_EXPORT, &m) < 0) {
                status = ST_HANDBACK;
                length = len;
                break;
            }
            if (mode == MODE_VERIFY) {
                /* PagingVerifier._verify_store, per record */
                int ts = tx_state(&t, m.tx_id);
                int counted = m.tx_id <= 0 || ts == TX_COMMITTED; /* PageCounterRebuildManager */
                int pending = 0;
                const unsigned char *qp = b + m.qids;
                for (int32_t i = 0; i < m.nq; i++) {
                    int64_t q = be64(qp + 8 * i);
                    Py_ssize_t qi = qfind(&t, q);
                    if (qi < 0)
                        continue;
                    int64_t flags = ((const int64_t *)t.qtab.buf)[4 * qi + 1];
                    if (!(flags & Q_KNOWN) || (flags & Q_COMPLETE) || acked(&t, qi, number))
                        continue;
                    pending = 1;
                    if (counted)
                        acc[2 + qi]++;
                }
                acc[0]++;
                if (pending && (ts == TX_NONE || ts == TX_COMMITTED))
                    acc[1]++;
                if (ts == TX_NOT_FOUND || ts == TX_PREPARED) {
                    PyEval_RestoreThread(ac.ts);
                    PyObject *v = PyLong_FromLongLong(m.tx_id);
                    failed = v == NULL || PyList_Append(PyTuple_GET_ITEM(lists, ts == TX_NOT_FOUND ? 0 : 1), v) < 0;
                    Py_XDECREF(v);
                    ac.ts = PyEval_SaveThread();
                    if (failed)
                        break;
                }
            } else if (mode == MODE_EXPORT) {
                /* export: where the persisted message lies, its page transaction's state and the queues
                 * still to consume it (queue_state pending), as paged_export_messages reads them */
                int ts = tx_state(&t, m.tx_id);
                if (ob_reserve(&o, 4 + 8 + 8 + 8 + 1 + 4 + 8 * (size_t)m.nq) < 0) {
                    nomem = 1;
                    break;
                }
                size_t head = o.n;
                int32_t num = number, npend = 0;
                int64_t ms = pos + 5 + 9, me = m.qids - 4;
                unsigned char tsb = (unsigned char)ts;
                memcpy(o.p + o.n, &num, 4);
                memcpy(o.p + o.n + 4, &ms, 8);
                memcpy(o.p + o.n + 12, &me, 8);
                memcpy(o.p + o.n + 20, &m.tx_id, 8);
                o.p[o.n + 28] = (char)tsb;
                o.n += 33;
                const unsigned char *qp = b + m.qids;
                for (int32_t i = 0; i < m.nq; i++) {
                    int64_t q = be64(qp + 8 * i);
                    if (queue_state(&t, q, number) != 3)
                        continue;
                    memcpy(o.p + o.n, &q, 8);
                    o.n += 8;
                    npend++;
                }
                memcpy(o.p + head + 29, &npend, 4);
            } else {
                if (ob_reserve(&o, 4) < 0) {
                    nomem = 1;
                    break;
                }
                if (acc[0])
                    acc[0] = 0;
                else
                    o.p[o.n++] = ',';
                OB_LIT(&o, "\n  ");
                int rc = record_json(&o, b, &m, &t, page, number, pos, safe, dumps, &ac);
                if (rc < 0) {
                    *(rc == -2 ? &nomem : &failed) = 1;
                    break;
                }
            }
        }
        number++;
        done_records++;
        pos = nxt;
    }
    PyEval_RestoreThread(ac.ts);
    if (nomem)
        PyErr_NoMemory();
    if (nomem || failed)
        goto done;
    PyObject *text;
    if (mode == MODE_JSON && ac.ascii) { /* the common case: no UTF-8 to validate */
        text = PyUnicode_New((Py_ssize_t)o.n, 127);
        if (text == NULL)
            goto done;
        if (o.n)
            memcpy(PyUnicode_DATA(text), o.p, o.n);
    } else if (mode == MODE_JSON) {
        text = PyUnicode_DecodeUTF8(o.p ? o.p : "", (Py_ssize_t)o.n, "surrogatepass");
        if (text == NULL)
            goto done;
    } else if (mode == MODE_EXPORT) {
        text = PyBytes_FromStringAndSize(o.p ? o.p : "", (Py_ssize_t)o.n);
        if (text == NULL)
            goto done;
    } else {
        text = Py_NewRef(Py_None);
    }
    result = Py_BuildValue("(iniiN)", status, pos, number, length, text);
done:
    PyMem_RawFree(o.p);
    Py_XDECREF(ac.raw);
    Py_XDECREF(ac.json);
    if (have_acc)
        PyBuffer_Release(&accv);
    tables_release(&t);
    PyBuffer_Release(&view);
    return result;
}
