/* Compaction's two per-record loops in C: where every record goes (compact_layout) and filling one output
 * file's buffer (compact_fill).  amqtool/engines/artemis/compact/plan.py holds the Python reference of both (_items and
 * _Layout); tests/engines/test_compact_native.py holds the two to byte-identical output files.
 *
 * compact_layout(live, sources, tail, replaceable, file_size, max_id)
 *     -> (plan, [(records, used)...], live_bytes, adds, replaceable_updates, marker_id)
 *   or -> (None, size) when a record of `size` bytes cannot fit in a file of `file_size` bytes.
 *   live: the live list (LIVE_FORMAT entries), sources: one SOURCE_FORMAT entry per live entry
 *   (Loader(sources=True)), tail: PLAN_FORMAT items of the transactions still open (prepared and failed:
 *   their records, deletes and PREPARE, in write order; k/out_off/nrec are filled in here), replaceable:
 *   256 bytes, non-zero for the replaceable user record types (counted for needsCompact's update factor;
 *   their updates are written in place like every other, as JournalCompactor.onReadUpdateRecord does),
 *   max_id: the load's maxID (an ADD + DELETE marker of it is appended when no kept record holds it).
 *   The write order and file placement are JournalCompactor's (see the compact package's docstring): the live list
 *   in order (every update where the load has it), committed transactions' records as ADD_TX/UPDATE_TX +
 *   COMMIT, then the tail, then the marker;
 *   COMPACT_SPLIT_LINE starts a new file once; numberOfRecords counts a transaction's records in the
 *   COMMIT's (or PREPARE's) own file.
 *
 * compact_fill(plan, start, stop, out, tag, fds, versions, extras, used) -> None or (file_index, offset)
 *   Encode items [start, stop) (one output file) into `out` (a writable buffer of the file's size) and zero
 *   it from `used` to the end; the 16-byte header is the caller's.  Bodies are read with pread from
 *   fds[src_fi] (an int32 array, one per source file).  A version-2 source record of the same type is
 *   copied whole, with neighbouring records of the same file in one pread, and only its tag and
 *   compactCount rewritten; its header is checked against the plan first.  Returns (file_index, offset)
 *   when a source record is no longer what the load saw there (the file changed or shrank meanwhile).
 *   Runs without the GIL.
 */
#include "journal_scan.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#pragma pack(push, 1)
typedef struct { /* LIVE_FORMAT "=qB?biqi" (journal_load.c's entry_t) */
    int64_t id;
    uint8_t user_record_type;
    uint8_t is_update;
    int8_t compact_count;
    int32_t file_index;
    int64_t body_offset;
    int32_t body_len;
} live_t;

typedef struct { /* SOURCE_FORMAT "=qB" */
    int64_t tx_id;
    uint8_t type;
} src_t;

/* PLAN_FORMAT "=BBbbBBiqiqiqqii": one record to write. */
typedef struct {
    uint8_t type;     /* output record type */
    uint8_t src_type; /* type of the source record (0: written from these fields alone) */
    int8_t cc;        /* output compactCount */
    int8_t orig_cc;   /* the source's compactCount (split line), -1 for records without a source */
    uint8_t utype;
    uint8_t invalid;  /* PREPARE of a failed transaction: numberOfRecords -1 */
    int32_t k;        /* output file index */
    int64_t out_off;  /* offset in that file */
    int32_t src_fi;   /* source file index, -1: no body */
    int64_t src_off;  /* offset of the body in the source file */
    int32_t body_len;
    int64_t tx_id;
    int64_t rid;
    int32_t nrec;     /* PREPARE / COMMIT: numberOfRecords */
    int32_t extra;    /* PREPARE: index into extras */
} item_t;
#pragma pack(pop)

#define PLAN_FORMAT "=BBbbBBiqiqiqqii"
#define FORMAT_VERSION 2
#define HEADER_SIZE 16
#define SPLIT_LINE 2     /* JournalImpl.COMPACT_SPLIT_LINE */
#define MAX_CC 127       /* JournalInternalRecord.setCompactCount saturates */
#define INVALID_NREC (-1)

static inline int8_t bump(int8_t cc) { return cc >= MAX_CC ? MAX_CC : (int8_t)(cc + 1); }

typedef struct {
    item_t *v;
    size_t n, cap;
} items_t;

static item_t *items_new(items_t *a) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 1024;
        item_t *v = realloc(a->v, cap * sizeof(item_t));
        if (v == NULL)
            return NULL;
        a->v = v;
        a->cap = cap;
    }
    item_t *it = &a->v[a->n++];
    memset(it, 0, sizeof *it);
    it->src_fi = -1;
    it->orig_cc = -1;
    return it;
}

/* _Layout of compact/plan.py: places items into files of file_size bytes. */
typedef struct {
    int64_t file_size;
    int64_t used;
    int split;
    int32_t nfiles;
    int64_t *records, *usedv; /* per output file */
    size_t cap;
    int64_t too_big; /* size of a record that can never fit, 0: none */
    int32_t grp_k;   /* the current transaction group's counter (JournalTransaction.getCounter) */
    int64_t grp_count;
    int nomem;
} layout_t;

static void lay_open(layout_t *L) {
    if (L->nfiles > 0)
        L->usedv[L->nfiles - 1] = L->used;
    if ((size_t)L->nfiles == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 16;
        int64_t *r = realloc(L->records, cap * sizeof(int64_t));
        if (r == NULL) {
            L->nomem = 1;
            return;
        }
        L->records = r;
        int64_t *u = realloc(L->usedv, cap * sizeof(int64_t));
        if (u == NULL) {
            L->nomem = 1;
            return;
        }
        L->usedv = u;
        L->cap = cap;
    }
    L->records[L->nfiles] = 0;
    L->usedv[L->nfiles] = HEADER_SIZE;
    L->nfiles++;
    L->used = HEADER_SIZE;
}

static void lay_check_size(layout_t *L, int64_t size) {
    if (size > L->file_size - HEADER_SIZE) {
        if (!L->too_big)
            L->too_big = size;
        return;
    }
    if (L->nfiles == 0 || L->used + size > L->file_size)
        lay_open(L);
}

static void lay_check_size_and_split(layout_t *L, int64_t size, int orig_cc) {
    if (L->nfiles == 0) {
        if (orig_cc < SPLIT_LINE)
            L->split = 1;
        lay_check_size(L, size);
        return;
    }
    if (orig_cc >= 0 && orig_cc < SPLIT_LINE && !L->split) {
        L->split = 1;
        lay_open(L);
    }
    lay_check_size(L, size);
}

static inline int64_t item_size(const item_t *it, int64_t extra_len) {
    return (int64_t)fixed_size(it->type, FORMAT_VERSION) + it->body_len + extra_len;
}

/* Place one item; tx-group counters are reset by the caller at each group's start. */
static void lay_add(layout_t *L, item_t *it, int64_t extra_len) {
    int t = it->type;
    int64_t size = item_size(it, extra_len);
    if ((t == ADD || t == UPDATE || t == ADD_TX || t == UPDATE_TX) && it->src_fi >= 0)
        lay_check_size_and_split(L, size, it->orig_cc);
    else
        lay_check_size(L, size);
    if (L->too_big || L->nomem)
        return;
    int32_t k = L->nfiles - 1;
    if (L->grp_k != k) {
        L->grp_k = k;
        L->grp_count = 0;
    }
    if (t == ADD_TX || t == UPDATE_TX || t == DELETE_TX)
        L->grp_count++;
    else if (t == PREPARE)
        it->nrec = it->invalid ? INVALID_NREC : (int32_t)L->grp_count;
    else if (t == COMMIT)
        it->nrec = (int32_t)L->grp_count;
    it->k = k;
    it->out_off = L->used;
    L->used += size;
    L->records[k]++;
}

static inline void group_start(layout_t *L) {
    L->grp_k = -1;
    L->grp_count = 0;
}

static void live_item(item_t *it, const live_t *e, int type, int64_t tx_id) {
    it->type = (uint8_t)type;
    it->src_type = (uint8_t)type;
    it->cc = bump(e->compact_count);
    it->orig_cc = e->compact_count;
    it->utype = e->user_record_type;
    it->src_fi = e->file_index;
    it->src_off = e->body_offset;
    it->body_len = e->body_len;
    it->tx_id = tx_id;
    it->rid = e->id;
}

PyObject *amq_compact_layout(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"live", "sources", "tail", "extra_lens", "replaceable", "file_size", "max_id", NULL};
    Py_buffer live_b, src_b, tail_b, xl_b, repl_b;
    long long file_size, max_id;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*y*y*y*LL:compact_layout", kwlist, &live_b, &src_b, &tail_b,
                                     &xl_b, &repl_b, &file_size, &max_id))
        return NULL;
    PyObject *result = NULL;
    items_t items = {0};
    layout_t L = {0};
    L.file_size = file_size;
    L.grp_k = -1;
    size_t n = (size_t)live_b.len / sizeof(live_t);
    size_t ntail = (size_t)tail_b.len / sizeof(item_t);
    const live_t *live = live_b.buf;
    const src_t *src = src_b.buf;
    const item_t *tail = tail_b.buf;
    const int32_t *extra_lens = xl_b.buf;
    size_t n_extra = (size_t)xl_b.len / sizeof(int32_t);
    const unsigned char *repl = repl_b.buf;
    if (live_b.len % sizeof(live_t) || src_b.len != (Py_ssize_t)(n * sizeof(src_t)) || tail_b.len % sizeof(item_t) ||
        xl_b.len % sizeof(int32_t) || repl_b.len != 256) {
        PyErr_SetString(PyExc_ValueError, "compact_layout: buffer sizes do not match their formats");
        goto done;
    }
    for (size_t i = 0; i < ntail; i++)
        if (tail[i].type == PREPARE && (tail[i].extra < 0 || (size_t)tail[i].extra >= n_extra)) {
            PyErr_SetString(PyExc_ValueError, "compact_layout: PREPARE without its extra data");
            goto done;
        }

    int64_t live_bytes = 0, adds = 0, repl_updates = 0, kept_max = -1;
    Py_BEGIN_ALLOW_THREADS
    size_t i = 0;
    while (i < n && !L.too_big && !L.nomem) {
        const live_t *e = &live[i];
        int st = src[i].type;
        if (st != ADD_TX && st != UPDATE_TX) { /* ADD or UPDATE */
            if (e->id > kept_max)
                kept_max = e->id;
            live_bytes += fixed_size(ADD, FORMAT_VERSION) + e->body_len;
            if (!e->is_update)
                adds++;
            /* counted for needsCompact's update factor, written in place like every other update */
            if (e->is_update && repl[e->user_record_type])
                repl_updates++;
            item_t *it = items_new(&items);
            if (it == NULL) {
                L.nomem = 1;
                break;
            }
            live_item(it, e, e->is_update ? UPDATE : ADD, -1);
            group_start(&L);
            lay_add(&L, it, 0);
            i++;
            continue;
        }
        /* a committed transaction's records sit together where its COMMIT was */
        int64_t tx = src[i].tx_id;
        group_start(&L);
        while (i < n && (src[i].type == ADD_TX || src[i].type == UPDATE_TX) && src[i].tx_id == tx && !L.too_big) {
            e = &live[i];
            if (e->id > kept_max)
                kept_max = e->id;
            live_bytes += fixed_size(ADD_TX, FORMAT_VERSION) + e->body_len;
            if (!e->is_update)
                adds++;
            item_t *it = items_new(&items);
            if (it == NULL) {
                L.nomem = 1;
                break;
            }
            live_item(it, e, e->is_update ? UPDATE_TX : ADD_TX, tx);
            lay_add(&L, it, 0);
            i++;
        }
        if (L.nomem || L.too_big)
            break;
        item_t *c = items_new(&items);
        if (c == NULL) {
            L.nomem = 1;
            break;
        }
        c->type = COMMIT;
        c->tx_id = tx;
        lay_add(&L, c, 0);
    }
    /* the transactions still open: their items come grouped by transaction */
    for (size_t j = 0; j < ntail && !L.too_big && !L.nomem; j++) {
        if (j == 0 || tail[j].tx_id != tail[j - 1].tx_id)
            group_start(&L);
        item_t *it = items_new(&items);
        if (it == NULL) {
            L.nomem = 1;
            break;
        }
        *it = tail[j];
        if ((it->type == ADD_TX || it->type == UPDATE_TX) && it->rid > kept_max)
            kept_max = it->rid;
        lay_add(&L, it, it->type == PREPARE ? extra_lens[it->extra] : 0);
    }
    /* maxID held by no kept record: an ADD + DELETE of it keeps load's maxID */
    if (max_id >= 0 && kept_max < max_id && !L.too_big && !L.nomem) {
        for (int m = 0; m < 2 && !L.nomem; m++) {
            item_t *it = items_new(&items);
            if (it == NULL) {
                L.nomem = 1;
                break;
            }
            it->type = m == 0 ? ADD : DELETE;
            it->rid = max_id;
            group_start(&L);
            lay_add(&L, it, 0);
        }
    }
    if (L.nfiles > 0)
        L.usedv[L.nfiles - 1] = L.used;
    Py_END_ALLOW_THREADS
    if (L.nomem) {
        PyErr_NoMemory();
        goto done;
    }
    if (L.too_big) {
        result = Py_BuildValue("(OL)", Py_None, (long long)L.too_big);
        goto done;
    }
    PyObject *outs = PyList_New(L.nfiles);
    if (outs == NULL)
        goto done;
    for (int32_t k = 0; k < L.nfiles; k++) {
        PyObject *pair = Py_BuildValue("(LL)", (long long)L.records[k], (long long)L.usedv[k]);
        if (pair == NULL) {
            Py_DECREF(outs);
            goto done;
        }
        PyList_SET_ITEM(outs, k, pair);
    }
    PyObject *plan = PyBytes_FromStringAndSize((const char *)items.v, (Py_ssize_t)(items.n * sizeof(item_t)));
    if (plan == NULL) {
        Py_DECREF(outs);
        goto done;
    }
    PyObject *marker = (max_id >= 0 && kept_max < max_id) ? PyLong_FromLongLong(max_id) : Py_NewRef(Py_None);
    result = Py_BuildValue("(NNLLLN)", plan, outs, (long long)live_bytes, (long long)adds, (long long)repl_updates,
                           marker);
done:
    free(items.v);
    free(L.records);
    free(L.usedv);
    PyBuffer_Release(&live_b);
    PyBuffer_Release(&src_b);
    PyBuffer_Release(&tail_b);
    PyBuffer_Release(&xl_b);
    PyBuffer_Release(&repl_b);
    return result;
}

/* ---- filling one output file ------------------------------------------------------------------------ */

static inline void put32(unsigned char *p, int32_t v) {
    p[0] = (unsigned char)((uint32_t)v >> 24);
    p[1] = (unsigned char)((uint32_t)v >> 16);
    p[2] = (unsigned char)((uint32_t)v >> 8);
    p[3] = (unsigned char)v;
}

static inline void put64(unsigned char *p, int64_t v) {
    put32(p, (int32_t)((uint64_t)v >> 32));
    put32(p + 4, (int32_t)(uint64_t)v);
}

/* pread exactly n bytes; 0 ok, 1 short (the file shrank), -1 errno set */
static int pread_full(int fd, unsigned char *dst, size_t n, int64_t off) {
    while (n > 0) {
        ssize_t r = pread(fd, dst, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            return 1;
        dst += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* Does the copied version-2 record at p hold what the plan says (type, ids, body length, checkSize)? */
static int verbatim_ok(const unsigned char *p, const item_t *it) {
    int t = it->type;
    int64_t total = fixed_size(t, FORMAT_VERSION) + it->body_len;
    if (p[0] != t || be32(p + total - 4) != total)
        return 0;
    if (t == ADD || t == UPDATE)
        return be64(p + 6) == it->rid && be32(p + 14) == it->body_len && p[18] == it->utype;
    /* ADD_TX / UPDATE_TX / DELETE_TX */
    if (be64(p + 6) != it->tx_id || be64(p + 14) != it->rid || be32(p + 22) != it->body_len)
        return 0;
    return t == DELETE_TX || p[26] == it->utype;
}

static inline int verbatim(const item_t *it, const unsigned char *versions, Py_ssize_t nver) {
    return it->src_type != 0 && it->src_type == it->type && it->src_fi >= 0 && it->src_fi < nver &&
           versions[it->src_fi] >= 2;
}

/* 0 ok; 1 a source no longer matches (bad_fi, bad_off set); -1 errno set; -2 bad plan */
static int fill(const item_t *plan, Py_ssize_t start, Py_ssize_t stop, unsigned char *out, Py_ssize_t out_len,
                int32_t tag, const int32_t *fds, Py_ssize_t nfds, const unsigned char *versions, Py_ssize_t nver,
                const char *const *extras, const Py_ssize_t *extra_lens, Py_ssize_t n_extra, int64_t used,
                int32_t *bad_fi, int64_t *bad_off) {
    Py_ssize_t i = start;
    while (i < stop) {
        const item_t *it = &plan[i];
        int t = it->type;
        if (t < ADD || t > COMMIT || t == EVENT || t == ROLLBACK)
            return -2;
        int64_t extra_len = t == PREPARE ? ((it->extra >= 0 && it->extra < n_extra) ? extra_lens[it->extra] : -1) : 0;
        if (extra_len < 0 || it->body_len < 0)
            return -2;
        int64_t size = fixed_size(t, FORMAT_VERSION) + it->body_len + extra_len;
        if (it->out_off < HEADER_SIZE || it->out_off + size > out_len)
            return -2;
        if (it->src_fi >= 0 && (it->src_fi >= nfds || fds[it->src_fi] < 0))
            return -2;
        unsigned char *p = out + it->out_off;
        if (verbatim(it, versions, nver)) {
            /* a run of records adjacent in both the source and the output: one pread */
            int64_t hdr = fixed_size(t, FORMAT_VERSION) - 4;
            int64_t src_start = it->src_off - hdr;
            int64_t run = size;
            Py_ssize_t j = i + 1;
            while (j < stop) {
                const item_t *nx = &plan[j];
                if (!verbatim(nx, versions, nver) || nx->src_fi != it->src_fi || nx->body_len < 0)
                    break;
                int64_t nhdr = fixed_size(nx->type, FORMAT_VERSION) - 4;
                int64_t nsize = nhdr + 4 + nx->body_len;
                if (nx->src_off - nhdr != src_start + run || nx->out_off != it->out_off + run ||
                    nx->out_off + nsize > out_len)
                    break;
                run += nsize;
                j++;
            }
            if (src_start < 0) {
                *bad_fi = it->src_fi;
                *bad_off = it->src_off;
                return 1;
            }
            int r = pread_full(fds[it->src_fi], p, (size_t)run, src_start);
            if (r < 0)
                return -1;
            if (r > 0) {
                *bad_fi = it->src_fi;
                *bad_off = src_start;
                return 1;
            }
            for (Py_ssize_t m = i; m < j; m++) {
                const item_t *x = &plan[m];
                unsigned char *q = out + x->out_off;
                if (!verbatim_ok(q, x)) {
                    *bad_fi = x->src_fi;
                    *bad_off = x->src_off - (fixed_size(x->type, FORMAT_VERSION) - 4);
                    return 1;
                }
                put32(q + 1, tag);
                q[5] = (unsigned char)x->cc;
            }
            i = j;
            continue;
        }
        p[0] = (unsigned char)t;
        put32(p + 1, tag);
        p[5] = (unsigned char)(t == DELETE_TX || t == DELETE || t == PREPARE || t == COMMIT ? 0 : it->cc);
        unsigned char *q = p + 6;
        switch (t) {
        case ADD:
        case UPDATE:
            put64(q, it->rid);
            put32(q + 8, it->body_len);
            q[12] = it->utype;
            q += 13;
            break;
        case ADD_TX:
        case UPDATE_TX:
            put64(q, it->tx_id);
            put64(q + 8, it->rid);
            put32(q + 16, it->body_len);
            q[20] = it->utype;
            q += 21;
            break;
        case DELETE_TX:
            put64(q, it->tx_id);
            put64(q + 8, it->rid);
            put32(q + 16, it->body_len);
            q += 20;
            break;
        case DELETE:
            put64(q, it->rid);
            q += 8;
            break;
        case PREPARE:
            put64(q, it->tx_id);
            put32(q + 8, it->nrec);
            put32(q + 12, (int32_t)extra_len);
            memcpy(q + 16, extras[it->extra], (size_t)extra_len);
            q += 16 + extra_len;
            break;
        case COMMIT:
            put64(q, it->tx_id);
            put32(q + 8, it->nrec);
            q += 12;
            break;
        }
        if (it->body_len > 0) {
            if (it->src_fi < 0)
                return -2;
            int r = pread_full(fds[it->src_fi], q, (size_t)it->body_len, it->src_off);
            if (r < 0)
                return -1;
            if (r > 0) {
                *bad_fi = it->src_fi;
                *bad_off = it->src_off;
                return 1;
            }
            q += it->body_len;
        }
        put32(q, (int32_t)size);
        i++;
    }
    if (used < HEADER_SIZE || used > out_len)
        return -2;
    memset(out + used, 0, (size_t)(out_len - used));
    return 0;
}

PyObject *amq_compact_fill(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"plan", "start", "stop", "out", "tag", "fds", "versions", "extras", "used", NULL};
    Py_buffer plan_b, out_b, fds_b, ver_b;
    Py_ssize_t start, stop;
    long long tag, used;
    PyObject *extras;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnw*Ly*y*O!L:compact_fill", kwlist, &plan_b, &start, &stop,
                                     &out_b, &tag, &fds_b, &ver_b, &PyTuple_Type, &extras, &used))
        return NULL;
    PyObject *result = NULL;
    const char **xp = NULL;
    Py_ssize_t *xl = NULL;
    Py_ssize_t n_items = plan_b.len / (Py_ssize_t)sizeof(item_t);
    if (plan_b.len % (Py_ssize_t)sizeof(item_t) || fds_b.len % (Py_ssize_t)sizeof(int32_t) || start < 0 ||
        stop > n_items || start > stop) {
        PyErr_SetString(PyExc_ValueError, "compact_fill: bad plan range or buffer sizes");
        goto done;
    }
    Py_ssize_t n_extra = PyTuple_GET_SIZE(extras);
    xp = PyMem_Malloc((size_t)(n_extra ? n_extra : 1) * sizeof(char *));
    xl = PyMem_Malloc((size_t)(n_extra ? n_extra : 1) * sizeof(Py_ssize_t));
    if (xp == NULL || xl == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t e = 0; e < n_extra; e++) {
        PyObject *b = PyTuple_GET_ITEM(extras, e);
        if (!PyBytes_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "compact_fill: extras must be bytes");
            goto done;
        }
        xp[e] = PyBytes_AS_STRING(b);
        xl[e] = PyBytes_GET_SIZE(b);
    }
    int32_t bad_fi = -1;
    int64_t bad_off = -1;
    int rc, err = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = fill(plan_b.buf, start, stop, out_b.buf, out_b.len, (int32_t)tag, fds_b.buf,
              fds_b.len / (Py_ssize_t)sizeof(int32_t), ver_b.buf, ver_b.len, xp, xl, n_extra, used, &bad_fi,
              &bad_off);
    err = errno;
    Py_END_ALLOW_THREADS
    if (rc == -1) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
    } else if (rc == -2) {
        PyErr_SetString(PyExc_ValueError, "compact_fill: the plan does not fit this output buffer");
    } else if (rc == 1) {
        result = Py_BuildValue("(iL)", (int)bad_fi, (long long)bad_off);
    } else {
        result = Py_NewRef(Py_None);
    }
done:
    PyMem_Free(xp);
    PyMem_Free(xl);
    PyBuffer_Release(&plan_b);
    PyBuffer_Release(&out_b);
    PyBuffer_Release(&fds_b);
    PyBuffer_Release(&ver_b);
    return result;
}

/* The distinct source files items [start, stop) read from, ascending. */
PyObject *amq_compact_sources(PyObject *self, PyObject *args) {
    Py_buffer plan_b;
    Py_ssize_t start, stop, nfiles;
    if (!PyArg_ParseTuple(args, "y*nnn:compact_sources", &plan_b, &start, &stop, &nfiles))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n_items = plan_b.len / (Py_ssize_t)sizeof(item_t);
    unsigned char *seen = NULL;
    if (start < 0 || stop > n_items || start > stop || nfiles < 0) {
        PyErr_SetString(PyExc_ValueError, "compact_sources: bad plan range");
        goto done;
    }
    seen = calloc((size_t)(nfiles ? nfiles : 1), 1);
    if (seen == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const item_t *plan = plan_b.buf;
    for (Py_ssize_t i = start; i < stop; i++)
        if (plan[i].src_fi >= 0 && plan[i].src_fi < nfiles)
            seen[plan[i].src_fi] = 1;
    result = PyList_New(0);
    for (Py_ssize_t f = 0; result != NULL && f < nfiles; f++) {
        if (!seen[f])
            continue;
        PyObject *v = PyLong_FromSsize_t(f);
        if (v == NULL || PyList_Append(result, v) < 0) {
            Py_XDECREF(v);
            Py_CLEAR(result);
            break;
        }
        Py_DECREF(v);
    }
done:
    free(seen);
    PyBuffer_Release(&plan_b);
    return result;
}

int amq_add_compact(PyObject *module) {
    if (sizeof(item_t) != 58) {
        PyErr_SetString(PyExc_ImportError, "compaction plan item is not packed to 58 bytes");
        return -1;
    }
    return PyModule_AddStringConstant(module, "PLAN_FORMAT", PLAN_FORMAT);
}
