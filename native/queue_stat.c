/* `amqtool stat`'s per-queue figures (amqtool.engines.stat.artemis) from the packed live entries of the
 * messages journal, without a Python object per record. The Python reference is BrokerState (decode=
 * DELIVERY_TYPES) plus formats.artemis.message.message_times; tests/native/test_queue_stat.py holds the two
 * equal.
 *
 *   stat_live(live, start, stop, data, file_index, acc, wbase, fsize, handback) -> next
 *       appends an item to the bytearray `acc` for each entry start.. of file `file_index` whose body lies in
 *       the window `data` (file bytes from offset `wbase`; `fsize` the file size): messages (types 30, 31,
 *       45: body size, timestamp, expiration read in place), refs (32), acks (33), delivery counts (34) and
 *       scheduled times (36); stops at an entry of another file, at one whose body is not in the window, or
 *       at `stop`. The live index of each message whose times C does not read is appended to the list
 *       `handback` (Python reads them: message_times).
 *   stat_queues(acc, now, overrides) -> {queue id: (messages, bytes, oldest, newest, expired, scheduled,
 *                                       redelivered, large)}
 *       merges the items as BrokerState does: the last message record of an id wins; a (message, queue)
 *       reference is live when the message exists, it has an ADD_REF and no ACKNOWLEDGE_REF; the last
 *       delivery count and scheduled time of a pair (in live-list order) win. A message whose times C does
 *       not read (AMQP large messages, unknown persisters, short bodies) is flagged; `overrides` maps such
 *       message ids to (timestamp, expiration) computed in Python (message_times), else (0, 0).
 * oldest/newest ignore timestamps <= 0; expired: 0 < expiration <= now; scheduled: time > now. */
#include "core_codec.h" /* be32, be64 */
#include "live_walk.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_HEADER_SPACE 13

typedef struct {
    int64_t mid, a, b, c, seq;
    int32_t kind, flag;
} sitem;

enum { K_MESSAGE = 0, K_REF = 1, K_ACK = 2, K_DELIVERY = 3, K_SCHEDULED = 4 };
enum { F_LARGE = 1, F_PYTHON = 2 };

/* Past an int length and that many bytes at *pos of p[0..n): 0 when they do not fit (or the length is negative). */
static int skip_sized(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos) {
    if (*pos + 4 > n)
        return 0;
    int32_t len = be32(p + *pos);
    if (len < 0 || *pos + 4 + (Py_ssize_t)len > n)
        return 0;
    *pos += 4 + (Py_ssize_t)len;
    return 1;
}

/* Past a nullable SimpleString (a flag byte; when set, an int length and that many bytes) at *pos of p[0..n):
 * 0 when it does not fit. */
static int skip_nullable_string(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos) {
    if (*pos + 1 > n)
        return 0;
    if (!p[(*pos)++])
        return 1;
    return skip_sized(p, n, pos);
}

/* The headers block of a core message (CoreMessage.encodeHeadersAndProperties) at p[0..n): messageID,
 * address, userID, type, durable, expiration, timestamp. 0 when it does not fit. */
static int read_headers(const unsigned char *p, Py_ssize_t n, int64_t *ts, int64_t *exp) {
    Py_ssize_t h = 8;
    if (!skip_nullable_string(p, n, &h))
        return 0;
    if (h + 1 > n)
        return 0;
    h += p[h] == 1 ? 17 : 1;
    if (h + 2 + 16 > n)
        return 0;
    *exp = be64(p + h + 2);
    *ts = be64(p + h + 10);
    return 1;
}

/* message_times for a type-45 body: core (persister 1) in place, AMQP 2/3/5 (timestamp 0; 5 carries the
 * expiration after its extra properties); 0 = hand back to Python. */
static int persisted_times(const unsigned char *p, Py_ssize_t n, int64_t *ts, int64_t *exp) {
    if (n < 1)
        return 0;
    if (p[0] == 1) {
        Py_ssize_t pos = 9; /* after the persister id and the message id: the address */
        if (!skip_nullable_string(p, n, &pos))
            return 0;
        if (pos + 8 > n)
            return 0;
        int32_t buf_len = be32(p + pos);
        int32_t end_of_body = be32(p + pos + 4);
        if (buf_len < 4 || (Py_ssize_t)buf_len > n - pos - 4 || end_of_body < BUFFER_HEADER_SPACE)
            return 0;
        Py_ssize_t inner = pos + 4, inner_end = inner + buf_len;
        Py_ssize_t h = inner + 4 + (Py_ssize_t)(end_of_body - BUFFER_HEADER_SPACE);
        if (h > inner_end)
            return 0;
        return read_headers(p + h, inner_end - h, ts, exp);
    }
    if (p[0] == 2 || p[0] == 3 || p[0] == 5) {
        Py_ssize_t pos = 17; /* after the persister id, the message id and the message format: the address */
        if (!skip_nullable_string(p, n, &pos) || !skip_sized(p, n, &pos)) /* the address, the AMQP data */
            return 0;
        *ts = 0;
        *exp = 0;
        if (p[0] == 2)
            return 1;
        if (!skip_sized(p, n, &pos)) /* the extra properties */
            return 0;
        if (p[0] == 3)
            return 1;
        if (pos + 8 > n)
            return 0;
        *exp = be64(p + pos);
        return 1;
    }
    return 0;
}

PyObject *amq_stat_live(PyObject *self, PyObject *args) {
    Py_buffer live, data;
    Py_ssize_t start, stop;
    int file_index;
    PyObject *acc;
    long long wbase = 0, fsize = -1;
    PyObject *handback = NULL;
    if (!PyArg_ParseTuple(args, "y*nny*iO!|LLO!:stat_live", &live, &start, &stop, &data, &file_index,
                          &PyByteArray_Type, &acc, &wbase, &fsize, &PyList_Type, &handback))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t i = start;
    if (!live_range_ok(live.len, start, stop, "stat_live"))
        goto done;
    const unsigned char *lb = live.buf, *db = data.buf;
    Py_ssize_t dlen = data.len;
    Py_ssize_t base = PyByteArray_GET_SIZE(acc);
    if (PyByteArray_Resize(acc, base + (stop - start) * (Py_ssize_t)sizeof(sitem)) < 0)
        goto done;
    sitem *out = (sitem *)(PyByteArray_AS_STRING(acc) + base);
    Py_ssize_t n = 0;
    for (; i < stop; i++) {
        int64_t id, off;
        int32_t blen;
        const unsigned char *e = live_entry_of_file(lb, i, file_index, &id, &off, &blen);
        if (e == NULL)
            break;
        int t = e[8];
        if (t != 30 && t != 31 && t != 45 && t != 32 && t != 33 && t != 34 && t != 36)
            continue;
        Py_ssize_t bs, be;
        if (!body_in_window(off, blen, wbase, dlen, fsize, &bs, &be))
            break; /* the caller moves the window there */
        const unsigned char *p = db + bs;
        Py_ssize_t len = be - bs;
        sitem it = {id, 0, 0, 0, i, 0, 0};
        if (t == 30 || t == 31 || t == 45) {
            it.kind = K_MESSAGE;
            it.a = blen;
            int64_t ts = 0, exp = 0;
            int ok = t == 45 ? persisted_times(p, len, &ts, &exp) : t == 30 ? read_headers(p, len, &ts, &exp) : 0;
            if (t == 30)
                it.flag |= F_LARGE;
            if (!ok && t != 31) {
                it.flag |= F_PYTHON; /* Python decodes it (or finds it undecodable: (0, 0)) */
                if (handback != NULL) {
                    PyObject *idx = PyLong_FromSsize_t(i);
                    int rc = idx == NULL ? -1 : PyList_Append(handback, idx);
                    Py_XDECREF(idx);
                    if (rc < 0) {
                        PyByteArray_Resize(acc, base);
                        goto done;
                    }
                }
            }
            it.b = ts;
            it.c = exp;
        } else if (t == 32 || t == 33) {
            if (len < 8)
                continue;
            it.kind = t == 32 ? K_REF : K_ACK;
            it.a = be64(p);
        } else if (t == 34) {
            if (len < 12)
                continue;
            it.kind = K_DELIVERY;
            it.a = be64(p);
            it.b = be32(p + 8);
        } else {
            if (len < 16)
                continue;
            it.kind = K_SCHEDULED;
            it.a = be64(p);
            it.b = be64(p + 8);
        }
        out[n++] = it;
    }
    if (PyByteArray_Resize(acc, base + n * (Py_ssize_t)sizeof(sitem)) < 0)
        goto done;
    result = PyLong_FromSsize_t(i);
done:
    PyBuffer_Release(&live);
    PyBuffer_Release(&data);
    return result;
}

static int cmp_item(const void *x, const void *y) {
    const sitem *a = x, *b = y;
    if (a->mid != b->mid)
        return a->mid < b->mid ? -1 : 1;
    /* messages first, then by queue, then in live-list order */
    int am = a->kind == K_MESSAGE, bm = b->kind == K_MESSAGE;
    if (am != bm)
        return bm - am;
    if (!am && a->a != b->a)
        return a->a < b->a ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return a->kind - b->kind;
}

typedef struct {
    int64_t qid, messages, bytes, oldest, newest, expired, scheduled, redelivered, large;
} qfig;

static int cmp_qid(const void *x, const void *y) {
    int64_t a = ((const qfig *)x)->qid, b = ((const qfig *)y)->qid;
    return a < b ? -1 : (a > b);
}

PyObject *amq_stat_queues(PyObject *self, PyObject *args) {
    PyObject *acc, *overrides;
    long long now;
    if (!PyArg_ParseTuple(args, "O!LO!:stat_queues", &PyByteArray_Type, &acc, &now, &PyDict_Type, &overrides))
        return NULL;
    Py_ssize_t n = PyByteArray_GET_SIZE(acc) / (Py_ssize_t)sizeof(sitem);
    sitem *items = PyMem_Malloc(sizeof(sitem) * (size_t)(n ? n : 1));
    qfig *qs = NULL;
    Py_ssize_t nq = 0, cap = 16;
    PyObject *result = NULL;
    if (items == NULL)
        return PyErr_NoMemory();
    memcpy(items, PyByteArray_AS_STRING(acc), sizeof(sitem) * (size_t)n);
    qsort(items, (size_t)n, sizeof(sitem), cmp_item);
    qs = PyMem_Malloc(sizeof(qfig) * (size_t)cap);
    if (qs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n;) {
        int64_t mid = items[i].mid;
        Py_ssize_t j = i;
        const sitem *msg = NULL;
        while (j < n && items[j].mid == mid && items[j].kind == K_MESSAGE)
            msg = &items[j++]; /* sorted by seq: the last record of the id wins */
        if (msg == NULL) { /* references of a message with no live message record: not live */
            while (j < n && items[j].mid == mid)
                j++;
            i = j;
            continue;
        }
        int64_t ts = msg->b, exp = msg->c;
        if (msg->flag & F_PYTHON) {
            PyObject *key = PyLong_FromLongLong(mid);
            if (key == NULL)
                goto done;
            PyObject *v = PyDict_GetItemWithError(overrides, key);
            Py_DECREF(key);
            if (v == NULL && PyErr_Occurred())
                goto done;
            ts = exp = 0;
            if (v != NULL && !PyArg_ParseTuple(v, "LL", &ts, &exp))
                goto done;
        }
        while (j < n && items[j].mid == mid) { /* one run per queue */
            int64_t qid = items[j].a;
            int ref = 0, ack = 0;
            int64_t delivery = 0, sched = 0;
            while (j < n && items[j].mid == mid && items[j].a == qid) {
                switch (items[j].kind) {
                case K_REF: ref = 1; break;
                case K_ACK: ack = 1; break;
                case K_DELIVERY: delivery = items[j].b; break;
                case K_SCHEDULED: sched = items[j].b; break;
                }
                j++;
            }
            if (!ref || ack)
                continue;
            qfig *q = NULL;
            for (Py_ssize_t k = 0; k < nq; k++) /* few queues: a linear search */
                if (qs[k].qid == qid) {
                    q = &qs[k];
                    break;
                }
            if (q == NULL) {
                if (nq == cap) {
                    qfig *grown = PyMem_Realloc(qs, sizeof(qfig) * (size_t)(cap *= 2));
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    qs = grown;
                }
                q = &qs[nq++];
                memset(q, 0, sizeof *q);
                q->qid = qid;
            }
            q->messages++;
            q->bytes += msg->a;
            if (ts > 0) {
                if (q->oldest == 0 || ts < q->oldest)
                    q->oldest = ts;
                if (ts > q->newest)
                    q->newest = ts;
            }
            if (exp > 0 && exp <= now)
                q->expired++;
            if (sched > now)
                q->scheduled++;
            if (delivery > 0)
                q->redelivered++;
            if (msg->flag & F_LARGE)
                q->large++;
        }
        i = j;
    }
    qsort(qs, (size_t)nq, sizeof(qfig), cmp_qid);
    result = PyDict_New();
    if (result == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < nq; k++) {
        qfig *q = &qs[k];
        PyObject *key = PyLong_FromLongLong(q->qid);
        PyObject *v = Py_BuildValue("(LLLLLLLL)", q->messages, q->bytes, q->oldest, q->newest, q->expired,
                                    q->scheduled, q->redelivered, q->large);
        int rc = (key == NULL || v == NULL) ? -1 : PyDict_SetItem(result, key, v);
        Py_XDECREF(key);
        Py_XDECREF(v);
        if (rc < 0) {
            Py_CLEAR(result);
            goto done;
        }
    }
done:
    PyMem_Free(items);
    PyMem_Free(qs);
    return result;
}
