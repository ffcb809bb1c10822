/* The per-queue message summary of `print --format json` (journal_print.queue_summary) and the committed
 * references of `export` (engines/artemis/live_refs.py) from the packed live entries, without a Python object
 * per record. The Python reference is BrokerState (broker_state.py): a message (types 30, 31, 45) stays on
 * each queue it has an ADD_REF for and no ACKNOWLEDGE_REF (refs minus acks, as `data exp` resolves them).
 *
 *   tally_live(live, start, stop, data, file_index, acc[, window base, file size, stop_outside]) -> next
 *       appends what entries start.. of file `file_index` (bytes `data`) contribute to the bytearray `acc`
 *       (17-byte items: kind, message id, value; kind 0 message (value: its live entry index), 1 ref and 2 ack
 *       (value: the queue id), 3 counted message, 4 counted large message, 5 a delivery count or scheduled
 *       time record, types 34 and 36 (value: its live entry index)), stopping at another file's entry or
 *       `stop`; with stop_outside, also at a ref or ack whose body is not in the window (else an error).
 *   tally_counts(acc) -> ({queue id: live messages}, messages, large_messages)
 *       sorts the items and merges them.
 *   tally_pairs(acc) -> (message ids, entries, starts, queue ids, others)
 *       every message id with a message record, ascending (int64), the live entry of its record (the last
 *       one, as BrokerState's dict keeps it), and its live queues: queue ids[starts[k]:starts[k+1]] (int64
 *       offsets) in the order of each queue's first ADD_REF (BrokerState.refs' first-put order, which
 *       HashMap iteration order depends on); others: the entry indexes of kind-5 items, in live order.
 * A ref or ack whose body (as LoadResult.body() reads it) is shorter than 8 bytes does not decode and is
 * left out, as BrokerState leaves it out. */
#include "core_codec.h" /* be64 */
#include "live_walk.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ITEM 17

PyObject *amq_tally_live(PyObject *self, PyObject *args) {
    Py_buffer live, data;
    Py_ssize_t start, stop;
    int file_index;
    PyObject *acc;
    long long wbase = 0, fsize = -1;
    int stop_outside = 0;
    if (!PyArg_ParseTuple(args, "y*nny*iO!|LLp:tally_live", &live, &start, &stop, &data, &file_index,
                          &PyByteArray_Type, &acc, &wbase, &fsize, &stop_outside))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t i = start;
    if (!live_range_ok(live.len, start, stop, "tally_live"))
        goto done;
    const unsigned char *lb = live.buf, *db = data.buf;
    Py_ssize_t dlen = data.len;
    /* at most two items per entry (a counted message is also a message) */
    Py_ssize_t base = PyByteArray_GET_SIZE(acc);
    if (PyByteArray_Resize(acc, base + (stop - start) * 2 * ITEM) < 0)
        goto done;
    unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(acc) + base;
    Py_ssize_t n = 0;
    for (; i < stop; i++) {
        int64_t id, off;
        int32_t blen;
        const unsigned char *e = live_entry_of_file(lb, i, file_index, &id, &off, &blen);
        if (e == NULL)
            break;
        int t = e[8];
        unsigned char kind;
        int64_t q = 0;
        if (t == 30 || t == 31 || t == 45) {
            unsigned char *p = out + n * ITEM;
            p[0] = t == 30 ? 4 : 3; /* message_counts counts entries */
            memcpy(p + 1, &id, 8);
            memcpy(p + 9, &q, 8);
            n++;
            kind = 0;
            q = (int64_t)i;
        } else if (t == 34 || t == 36) {
            kind = 5;
            q = (int64_t)i;
        } else if (t == 32 || t == 33) {
            Py_ssize_t bs, be;
            if (!body_in_window(off, blen, wbase, dlen, fsize, &bs, &be)) {
                if (stop_outside)
                    break;
                PyErr_SetString(PyExc_ValueError, "tally_live: a body outside the window given");
                PyByteArray_Resize(acc, base); /* nothing added */
                goto done;
            }
            if (be - bs < 8)
                continue;
            q = be64(db + bs);
            kind = t == 32 ? 1 : 2;
        } else {
            continue;
        }
        unsigned char *p = out + n * ITEM;
        p[0] = kind;
        memcpy(p + 1, &id, 8);
        memcpy(p + 9, &q, 8);
        n++;
    }
    if (PyByteArray_Resize(acc, base + n * ITEM) < 0)
        goto done;
    result = PyLong_FromSsize_t(i);
done:
    PyBuffer_Release(&live);
    PyBuffer_Release(&data);
    return result;
}

typedef struct {
    int64_t mid, qid, pos; /* pos: the item's place in acc (load order) */
    int kind;
} pitem;

static int cmp_pitem(const void *a, const void *b) {
    const pitem *x = a, *y = b;
    if (x->mid != y->mid)
        return x->mid < y->mid ? -1 : 1;
    if (x->qid != y->qid)
        return x->qid < y->qid ? -1 : 1;
    return x->pos < y->pos ? -1 : (x->pos > y->pos);
}

/* Sort the ref (kind 1) and ack (kind 2) items and keep one item per live (message, queue) pair -- a ref and
 * no ack, whatever their order -- in place, its pos the first ref's; returns how many. Runs without the GIL. */
static Py_ssize_t live_pairs(pitem *pairs, Py_ssize_t np) {
    qsort(pairs, (size_t)np, sizeof(pitem), cmp_pitem);
    Py_ssize_t nl = 0;
    for (Py_ssize_t i = 0; i < np;) {
        Py_ssize_t j = i;
        int ack = 0;
        int64_t first = -1;
        while (j < np && pairs[j].mid == pairs[i].mid && pairs[j].qid == pairs[i].qid) {
            if (pairs[j].kind == 1 && first < 0)
                first = pairs[j].pos;
            ack |= pairs[j].kind == 2;
            j++;
        }
        if (first >= 0 && !ack)
            pairs[nl++] = (pitem){pairs[i].mid, pairs[i].qid, first, 1};
        i = j;
    }
    return nl;
}

static int cmp_mid(const void *a, const void *b) {
    const pitem *x = a, *y = b;
    return x->mid < y->mid ? -1 : (x->mid > y->mid);
}

static int cmp_q(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : (x > y);
}

/* The items of acc, split by kind: refs and acks (pairs), message records (msgs: mid, its entry as pos),
 * kind-5 entries (others) and the counted messages. Arrays PyMem_Raw-allocated (free with items_free). */
typedef struct {
    pitem *pairs, *msgs;
    int64_t *others;
    Py_ssize_t np, nm, no;
    long long messages, large;
} items_t;

static void items_free(items_t *t) {
    PyMem_RawFree(t->pairs);
    PyMem_RawFree(t->msgs);
    PyMem_RawFree(t->others);
}

static int items_read(PyObject *acc, items_t *t) {
    memset(t, 0, sizeof *t);
    Py_ssize_t n = PyByteArray_GET_SIZE(acc) / ITEM;
    const unsigned char *in = (const unsigned char *)PyByteArray_AS_STRING(acc);
    size_t cap = (size_t)(n ? n : 1);
    t->pairs = PyMem_RawMalloc(sizeof(pitem) * cap);
    t->msgs = PyMem_RawMalloc(sizeof(pitem) * cap);
    t->others = PyMem_RawMalloc(sizeof(int64_t) * cap);
    if (t->pairs == NULL || t->msgs == NULL || t->others == NULL) {
        items_free(t);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *p = in + i * ITEM;
        int64_t mid, v;
        memcpy(&mid, p + 1, 8);
        memcpy(&v, p + 9, 8);
        switch (p[0]) {
        case 0: t->msgs[t->nm++] = (pitem){mid, v, v, 0}; break;
        case 1:
        case 2: t->pairs[t->np++] = (pitem){mid, v, i, p[0]}; break;
        case 3: t->messages++; break;
        case 4: t->large++; break;
        case 5: t->others[t->no++] = v; break;
        }
    }
    return 0;
}

/* live pairs and message records alike: by message id, then by pos (qid: the first ref's pos, or the entry) */
static int cmp_by_pos(const void *a, const void *b) {
    const pitem *x = a, *y = b;
    if (x->mid != y->mid)
        return x->mid < y->mid ? -1 : 1;
    return x->pos < y->pos ? -1 : (x->pos > y->pos);
}

PyObject *amq_tally_counts(PyObject *self, PyObject *args) {
    PyObject *acc;
    if (!PyArg_ParseTuple(args, "O!:tally_counts", &PyByteArray_Type, &acc))
        return NULL;
    items_t t;
    if (items_read(acc, &t) < 0)
        return NULL;
    pitem *pairs = t.pairs;
    int64_t *qs = t.others; /* reused: at least as long as the items */
    PyObject *counts = NULL, *result = NULL;
    long long messages = t.messages, large = t.large;
    Py_ssize_t nq = 0;
    qsort(t.msgs, (size_t)t.nm, sizeof(pitem), cmp_by_pos);
    /* live pairs whose message exists */
    Py_ssize_t nl = live_pairs(pairs, t.np);
    for (Py_ssize_t i = 0; i < nl; i++) {
        pitem key = {pairs[i].mid, 0, 0, 0};
        if (bsearch(&key, t.msgs, (size_t)t.nm, sizeof(pitem), cmp_mid) != NULL)
            qs[nq++] = pairs[i].qid;
    }
    qsort(qs, (size_t)nq, sizeof(int64_t), cmp_q);
    counts = PyDict_New();
    if (counts == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < nq;) {
        Py_ssize_t j = i;
        while (j < nq && qs[j] == qs[i])
            j++;
        PyObject *k = PyLong_FromLongLong(qs[i]), *v = PyLong_FromSsize_t(j - i);
        int rc = (k == NULL || v == NULL) ? -1 : PyDict_SetItem(counts, k, v);
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc < 0)
            goto done;
        i = j;
    }
    result = Py_BuildValue("(OLL)", counts, messages, large);
done:
    Py_XDECREF(counts);
    items_free(&t);
    return result;
}

PyObject *amq_tally_pairs(PyObject *self, PyObject *args) {
    PyObject *acc;
    if (!PyArg_ParseTuple(args, "O!:tally_pairs", &PyByteArray_Type, &acc))
        return NULL;
    items_t t;
    if (items_read(acc, &t) < 0)
        return NULL;
    pitem *pairs = t.pairs, *msgs = t.msgs;
    int64_t *others = t.others;
    Py_ssize_t np = t.np, nm = t.nm, no = t.no;
    int64_t *o_mid = NULL, *o_entry = NULL, *o_start = NULL, *o_q = NULL;
    PyObject *result = NULL;
    Py_ssize_t nl = 0, nu = 0;
    Py_BEGIN_ALLOW_THREADS
    nl = live_pairs(pairs, np); /* then by message, each queue at its first ref's place */
    qsort(pairs, (size_t)nl, sizeof(pitem), cmp_by_pos);
    qsort(msgs, (size_t)nm, sizeof(pitem), cmp_by_pos);
    /* one entry per message id: the last record (the highest entry index) */
    for (Py_ssize_t i = 0; i < nm; i++) {
        if (i + 1 < nm && msgs[i + 1].mid == msgs[i].mid)
            continue;
        msgs[nu++] = msgs[i];
    }
    Py_END_ALLOW_THREADS
    o_mid = PyMem_RawMalloc(sizeof(int64_t) * (size_t)(nu ? nu : 1));
    o_entry = PyMem_RawMalloc(sizeof(int64_t) * (size_t)(nu ? nu : 1));
    o_start = PyMem_RawMalloc(sizeof(int64_t) * (size_t)(nu + 1));
    o_q = PyMem_RawMalloc(sizeof(int64_t) * (size_t)(nl ? nl : 1));
    if (o_mid == NULL || o_entry == NULL || o_start == NULL || o_q == NULL)
        goto nomem;
    Py_ssize_t nq = 0, k = 0;
    for (Py_ssize_t m = 0; m < nu; m++) {
        int64_t mid = msgs[m].mid;
        while (k < nl && pairs[k].mid < mid) /* refs of a message without a record: no rows */
            k++;
        o_mid[m] = mid;
        o_entry[m] = msgs[m].pos;
        o_start[m] = nq;
        while (k < nl && pairs[k].mid == mid)
            o_q[nq++] = pairs[k++].qid;
    }
    o_start[nu] = nq;
    result = Py_BuildValue("(y#y#y#y#y#)", (const char *)o_mid, (Py_ssize_t)(nu * 8), (const char *)o_entry,
                           (Py_ssize_t)(nu * 8), (const char *)o_start, (Py_ssize_t)((nu + 1) * 8),
                           (const char *)o_q, (Py_ssize_t)(nq * 8), (const char *)others, (Py_ssize_t)(no * 8));
    goto done;
nomem:
    PyErr_NoMemory();
done:
    items_free(&t);
    PyMem_RawFree(o_mid);
    PyMem_RawFree(o_entry);
    PyMem_RawFree(o_start);
    PyMem_RawFree(o_q);
    return result;
}
