/* The per-queue message summary of `print --format json` (journal_print.queue_summary) from the packed live
 * entries, without a Python object per record. The Python reference is BrokerState (broker_state.py,
 * decode=REF_TYPES): a message (types 30, 31, 45) stays on each queue it has an ADD_REF for and no
 * ACKNOWLEDGE_REF (refs minus acks, as `data exp` resolves them).
 *
 *   tally_live(live, start, stop, data, file_index, acc) -> next
 *       appends what entries start.. of file `file_index` (bytes `data`) contribute to the bytearray `acc`
 *       (17-byte items: kind, message id, queue id; kind 0 message, 1 ref, 2 ack, 3 counted message, 4
 *       counted large message), stopping at another file's entry or `stop`.
 *   tally_counts(acc) -> ({queue id: live messages}, messages, large_messages)
 *       sorts the items and merges them.
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
    if (!PyArg_ParseTuple(args, "y*nny*iO!|LL:tally_live", &live, &start, &stop, &data, &file_index,
                          &PyByteArray_Type, &acc, &wbase, &fsize))
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
        } else if (t == 32 || t == 33) {
            Py_ssize_t bs, be;
            if (!body_in_window(off, blen, wbase, dlen, fsize, &bs, &be)) {
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
    int64_t mid, qid;
    int kind;
} titem;

static int cmp_pair(const void *a, const void *b) {
    const titem *x = a, *y = b;
    if (x->mid != y->mid)
        return x->mid < y->mid ? -1 : 1;
    if (x->qid != y->qid)
        return x->qid < y->qid ? -1 : 1;
    return x->kind - y->kind;
}

static int cmp_q(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : (x > y);
}

PyObject *amq_tally_counts(PyObject *self, PyObject *args) {
    PyObject *acc;
    if (!PyArg_ParseTuple(args, "O!:tally_counts", &PyByteArray_Type, &acc))
        return NULL;
    Py_ssize_t n = PyByteArray_GET_SIZE(acc) / ITEM;
    const unsigned char *in = (const unsigned char *)PyByteArray_AS_STRING(acc);
    titem *pairs = PyMem_Malloc(sizeof(titem) * (size_t)(n ? n : 1));
    int64_t *msgs = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *qs = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    PyObject *counts = NULL, *result = NULL;
    if (pairs == NULL || msgs == NULL || qs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    long long messages = 0, large = 0;
    Py_ssize_t np = 0, nm = 0, nq = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *p = in + i * ITEM;
        int64_t mid, qid;
        memcpy(&mid, p + 1, 8);
        memcpy(&qid, p + 9, 8);
        switch (p[0]) {
        case 0: msgs[nm++] = mid; break;
        case 1:
        case 2: pairs[np].mid = mid; pairs[np].qid = qid; pairs[np].kind = p[0]; np++; break;
        case 3: messages++; break;
        case 4: large++; break;
        }
    }
    qsort(msgs, (size_t)nm, sizeof(int64_t), cmp_q);
    qsort(pairs, (size_t)np, sizeof(titem), cmp_pair);
    /* each (message, queue) run: live when it has a ref (kind 1) and no ack (kind 2) and the message exists */
    for (Py_ssize_t i = 0; i < np;) {
        Py_ssize_t j = i;
        int ref = 0, ack = 0;
        while (j < np && pairs[j].mid == pairs[i].mid && pairs[j].qid == pairs[i].qid) {
            ref |= pairs[j].kind == 1;
            ack |= pairs[j].kind == 2;
            j++;
        }
        if (ref && !ack && bsearch(&pairs[i].mid, msgs, (size_t)nm, sizeof(int64_t), cmp_q) != NULL)
            qs[nq++] = pairs[i].qid;
        i = j;
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
    PyMem_Free(pairs);
    PyMem_Free(msgs);
    PyMem_Free(qs);
    return result;
}
