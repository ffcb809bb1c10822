/* The journal load state machine in C: JournalImpl.load / JournalTransaction (artemis-journal-format.md §3).
 *
 * amqtool.engines.load.load_journal is the reference (and the fallback); this file makes the same decisions
 * record by record without creating a Python object per record, so a 1 GiB journal loads in well under a
 * second and the live list costs 27 bytes per entry.  tests/native/test_loader.py holds the two to identical
 * results (live list, prepared and failed transactions, counts, anomalies, per-file statistics).
 *
 * Python drives it one file at a time; the Loader reads each file itself through a bounded window
 * (journal_window.h: never the whole file, never mapped), so memory is the window plus the live index:
 *
 *   ld = Loader(max_examples=100, window=4 << 20)
 *   for each file:  ld.feed(fd, file_index, tag, version, check_tag, gaps) -> file statistics
 *   ld.finish() -> (live_count, max_id, number_of_records, transactions, anomalies, anomaly_counts)
 *
 * after which the Loader itself exports the live list through the buffer protocol: live_count packed
 * entries of LIVE_FORMAT ("=qB?biqi": id, user_record_type, is_update, compact_count, file_index,
 * body_offset, body_len), in the order Artemis' load returns them.  Loader(sources=True) also keeps, per
 * live entry, the record it came from (SOURCE_FORMAT "=qB": tx id or -1, ADD/UPDATE/ADD_TX/UPDATE_TX),
 * returned by ld.sources() — what compaction needs to write committed records back as a transaction and
 * to copy version-2 records verbatim.
 *
 * The rules mirrored (see load.py's docstring for the prose): ADD/UPDATE append in scan order; DELETE removes
 * every entry of the id, also later ones (we keep a deleted-id set and filter, which gives the same list);
 * transactional records wait in a holder until a healthy COMMIT (numberOfRecords == the holder's counter for
 * the commit's file, the counter resetting whenever the file changes); unknown COMMIT/ROLLBACK are noted and
 * do not make the file a data file; EVENT is ignored.
 */
#include "journal_window.h"

#include <stdlib.h>

/* ---- int64 -> int64 hash map / int64 set: linear probing, backward-shift deletion -------------------- */

#define EMPTY_KEY INT64_MIN /* stored aside (has_min) when it is a real key */

typedef struct {
    int64_t *keys;
    int64_t *vals; /* NULL for a set */
    size_t cap;    /* power of two (0 before the first insert) */
    size_t n;      /* keys in the table (EMPTY_KEY excluded) */
    int has_min;
    int64_t min_val;
    int is_map;
} i64map;

/* Home slot of k.  Ids come from Artemis' sequence generator, so the ids a load touches one after the other
 * are mostly consecutive: hashing k >> 3 and keeping the low 3 bits puts 8 consecutive ids in one cache
 * line (64 bytes), while the mixing of the high part still spreads strided or hostile ids. */
static inline size_t home_slot(int64_t k, size_t mask) {
    uint64_t x = (uint64_t)k >> 3;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)((x << 3) | ((uint64_t)k & 7)) & mask;
}

static void map_free(i64map *m) {
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
    m->has_min = 0;
}

static inline size_t map_size(const i64map *m) { return m->n + (m->has_min ? 1 : 0); }

/* Slot index of k, or -1. */
static inline Py_ssize_t map_slot(const i64map *m, int64_t k) {
    if (m->cap == 0)
        return -1;
    size_t mask = m->cap - 1, i = home_slot(k, mask);
    for (;;) {
        int64_t s = m->keys[i];
        if (s == k)
            return (Py_ssize_t)i;
        if (s == EMPTY_KEY)
            return -1;
        i = (i + 1) & mask;
    }
}

/* Start loading k's home slot: a load touches two tables per record, and prefetching both first lets the
 * two cache misses overlap instead of following each other. */
static inline void map_prefetch(const i64map *m, int64_t k) {
    if (m->cap)
        __builtin_prefetch(&m->keys[home_slot(k, m->cap - 1)]);
}

static inline int map_contains(const i64map *m, int64_t k) {
    if (k == EMPTY_KEY)
        return m->has_min;
    return map_slot(m, k) >= 0;
}

/* Value of k into *v; 0 when absent. */
static inline int map_get(const i64map *m, int64_t k, int64_t *v) {
    if (k == EMPTY_KEY) {
        if (m->has_min)
            *v = m->min_val;
        return m->has_min;
    }
    Py_ssize_t s = map_slot(m, k);
    if (s < 0)
        return 0;
    if (m->vals)
        *v = m->vals[s];
    return 1;
}

static int map_grow(i64map *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    int64_t *keys = malloc(cap * sizeof(int64_t));
    int64_t *vals = m->is_map ? malloc(cap * sizeof(int64_t)) : NULL;
    if (keys == NULL || (m->is_map && vals == NULL)) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < cap; i++)
        keys[i] = EMPTY_KEY;
    size_t mask = cap - 1;
    for (size_t j = 0; j < m->cap; j++) {
        int64_t k = m->keys[j];
        if (k == EMPTY_KEY)
            continue;
        size_t i = home_slot(k, mask);
        while (keys[i] != EMPTY_KEY)
            i = (i + 1) & mask;
        keys[i] = k;
        if (vals)
            vals[i] = m->vals[j];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

/* Insert or overwrite; 1 if k was new, 0 if present, -1 out of memory. */
static int map_put(i64map *m, int64_t k, int64_t v) {
    if (k == EMPTY_KEY) {
        int was = m->has_min;
        m->has_min = 1;
        m->min_val = v;
        return !was;
    }
    if ((m->n + 1) * 10 > m->cap * 7 && map_grow(m) < 0)
        return -1;
    size_t mask = m->cap - 1, i = home_slot(k, mask);
    for (;;) {
        int64_t s = m->keys[i];
        if (s == k) {
            if (m->vals)
                m->vals[i] = v;
            return 0;
        }
        if (s == EMPTY_KEY)
            break;
        i = (i + 1) & mask;
    }
    m->keys[i] = k;
    if (m->vals)
        m->vals[i] = v;
    m->n++;
    return 1;
}

/* Remove k; 1 if it was there. Backward-shift deletion keeps probe chains intact without tombstones. */
static int map_del(i64map *m, int64_t k) {
    if (k == EMPTY_KEY) {
        int was = m->has_min;
        m->has_min = 0;
        return was;
    }
    Py_ssize_t s = map_slot(m, k);
    if (s < 0)
        return 0;
    size_t mask = m->cap - 1, i = (size_t)s, j = i;
    for (;;) {
        j = (j + 1) & mask;
        int64_t kj = m->keys[j];
        if (kj == EMPTY_KEY)
            break;
        size_t home = home_slot(kj, mask);
        /* move kj into the hole at i unless its home lies cyclically in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            m->keys[i] = kj;
            if (m->vals)
                m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = EMPTY_KEY;
    m->n--;
    return 1;
}

/* ---- live entries, packed exactly as LIVE_FORMAT "=qB?biqi" ------------------------------------------ */

#pragma pack(push, 1)
typedef struct {
    int64_t id;
    uint8_t user_record_type;
    uint8_t is_update; /* 0 or 1: struct's '?' */
    int8_t compact_count;
    int32_t file_index;
    int64_t body_offset;
    int32_t body_len;
} entry_t;
#pragma pack(pop)

typedef struct {
    entry_t *v;
    size_t n, cap;
} entries_t;

/* Where a live entry came from, kept beside the live list when the Loader is created with sources=True
 * (compaction: a committed transaction's records are written back as ADD_TX/UPDATE_TX + COMMIT, and a
 * version-2 record can be copied verbatim once its header size is known). Packed as SOURCE_FORMAT "=qB":
 * the transaction id (-1 for ADD/UPDATE) and the record type (ADD, UPDATE, ADD_TX or UPDATE_TX). */
#pragma pack(push, 1)
typedef struct {
    int64_t tx_id;
    uint8_t type;
} source_t;
#pragma pack(pop)

typedef struct {
    source_t *v;
    size_t n, cap;
} sources_t;

/* Room for one more element in a doubling array (*v, *cap, n elements of elem bytes): 0, or -1 when out of
 * memory (the array is left as it was). */
static inline int grow_for_one(void **v, size_t *cap, size_t n, size_t elem) {
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *nv = realloc(*v, c * elem);
    if (nv == NULL)
        return -1;
    *v = nv;
    *cap = c;
    return 0;
}

static inline int sources_push(sources_t *a, int64_t tx_id, int type) {
    if (grow_for_one((void **)&a->v, &a->cap, a->n, sizeof(source_t)) < 0)
        return -1;
    a->v[a->n].tx_id = tx_id;
    a->v[a->n].type = (uint8_t)type;
    a->n++;
    return 0;
}

static inline int entries_push(entries_t *a, const entry_t *e) {
    if (grow_for_one((void **)&a->v, &a->cap, a->n, sizeof(entry_t)) < 0)
        return -1;
    a->v[a->n++] = *e;
    return 0;
}

/* ---- transactions: TransactionHolder + JournalTransaction counters, as _Tx in load.py ---------------- */

typedef struct {
    int64_t tx_id;
    uint64_t seq; /* first-seen order (Java's LinkedHashMap): failed/prepared are reported in it */
    entries_t recs, dels;
    int prepared, invalid;
    unsigned char *extra;
    int32_t extra_len;
    int has_extra;
    int32_t last_file;
    int64_t counter;
    int has_ploc;
    int32_t ploc_file;
    int64_t ploc_off;
} tx_t;

static void tx_free(tx_t *tx) {
    if (tx == NULL)
        return;
    free(tx->recs.v);
    free(tx->dels.v);
    free(tx->extra);
    free(tx);
}

/* JournalTransaction.getCounter: reading it for another file resets it. */
static inline int64_t tx_counter_for(tx_t *tx, int32_t fi) {
    if (tx->last_file != fi) {
        tx->last_file = fi;
        tx->counter = 0;
    }
    return tx->counter;
}

static inline void tx_inc(tx_t *tx, int32_t fi) {
    tx_counter_for(tx, fi);
    tx->counter++;
}

/* ---- anomalies ------------------------------------------------------------------------------------- */

enum { AN_UPDATE_UNKNOWN, AN_DELETE_UNKNOWN, AN_PREPARE_MISMATCH, AN_COMMIT_MISMATCH, AN_COMMIT_UNKNOWN,
       AN_ROLLBACK_UNKNOWN, AN_ADD_DELETED, AN_KINDS };
static const char *const anomaly_names[AN_KINDS] = {
    "update-unknown-id", "delete-unknown-id", "prepare-count-mismatch", "commit-count-mismatch",
    "commit-unknown-tx", "rollback-unknown-tx", "add-of-deleted-id",
};

typedef struct {
    int code;
    int32_t fi;
    int64_t off;
    int64_t a, b, c, d; /* the ids of the code, in load.py's keyword order */
} anomaly_t;

/* ---- the Loader object ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    entries_t live;   /* appended entries; ids in `deleted` are filtered out (compact()) */
    int want_sources; /* keep `sources` in step with `live` */
    sources_t sources;
    size_t compacted; /* live.n right after the last compaction */
    i64map deleted;   /* ids deleted at any point: every entry of them is dropped */
    i64map live_ids;  /* JournalImpl.records keys: numberOfRecords */
    i64map txs;       /* tx id -> tx_t* */
    uint64_t tx_seq;
    int64_t max_id;
    anomaly_t *anomalies;
    size_t n_anomalies, cap_anomalies;
    Py_ssize_t counts[AN_KINDS];
    int count_order[AN_KINDS], n_count_order; /* first-seen order of the codes (dict order in load.py) */
    Py_ssize_t max_examples;
    int finished;
    int busy;      /* a feed() runs without the GIL: refuse reentry from another thread */
    unsigned char *wbuf; /* the read window, reused from file to file */
    size_t wcap;
    Py_ssize_t window;
    Py_ssize_t exports; /* buffer views handed out */
} LoaderObject;

static int note(LoaderObject *self, int code, int32_t fi, int64_t off, int64_t a, int64_t b, int64_t c,
                int64_t d) {
    Py_ssize_t n = self->counts[code]++;
    if (n == 0)
        self->count_order[self->n_count_order++] = code;
    if (n >= self->max_examples)
        return 0;
    if (grow_for_one((void **)&self->anomalies, &self->cap_anomalies, self->n_anomalies, sizeof(anomaly_t)) < 0)
        return -1;
    anomaly_t *x = &self->anomalies[self->n_anomalies++];
    x->code = code;
    x->fi = fi;
    x->off = off;
    x->a = a;
    x->b = b;
    x->c = c;
    x->d = d;
    return 0;
}

/* load.py's append(): an entry of an already deleted id is dropped right away; an ADD so dropped is noted
   (add-of-deleted-id, at its body's offset): the broker deletes a record only after adding it. */
static inline int append_live(LoaderObject *self, const entry_t *e, int64_t tx_id, int type) {
    if (self->deleted.n + self->deleted.has_min && map_contains(&self->deleted, e->id))
        return e->is_update ? 0 : note(self, AN_ADD_DELETED, e->file_index, e->body_offset, e->id, 0, 0, 0);
    if (self->want_sources && sources_push(&self->sources, tx_id, type) < 0)
        return -1;
    return entries_push(&self->live, e);
}

/* Drop the entries of deleted ids, keeping order (load.py deletes them as it goes; same list). */
static void compact_live(LoaderObject *self) {
    if (map_size(&self->deleted) == 0) {
        self->compacted = self->live.n;
        return;
    }
    entry_t *v = self->live.v;
    source_t *src = self->want_sources ? self->sources.v : NULL;
    size_t w = 0;
    for (size_t r = 0; r < self->live.n; r++) {
        if (!map_contains(&self->deleted, v[r].id)) {
            if (w != r) {
                v[w] = v[r];
                if (src)
                    src[w] = src[r];
            }
            w++;
        }
    }
    self->live.n = w;
    if (src)
        self->sources.n = w;
    self->compacted = w;
}

static tx_t *tx_get_or_create(LoaderObject *self, int64_t tx_id) {
    int64_t p = 0;
    if (map_get(&self->txs, tx_id, &p))
        return (tx_t *)(intptr_t)p;
    tx_t *tx = calloc(1, sizeof(tx_t));
    if (tx == NULL)
        return NULL;
    tx->tx_id = tx_id;
    tx->seq = self->tx_seq++;
    tx->last_file = -1;
    if (map_put(&self->txs, tx_id, (int64_t)(intptr_t)tx) < 0) {
        free(tx);
        return NULL;
    }
    return tx;
}

static tx_t *tx_pop(LoaderObject *self, int64_t tx_id) {
    int64_t p = 0;
    if (!map_get(&self->txs, tx_id, &p))
        return NULL;
    map_del(&self->txs, tx_id);
    return (tx_t *)(intptr_t)p;
}

typedef struct {
    Py_ssize_t records;
    int marked, has_data;
    Py_ssize_t last_data_pos;
    Py_ssize_t type_counts[10];
    int type_order[10], n_types; /* first-appearance order of the types (dict order in load.py) */
    /* verify's gaps: non-filler bytes between accepted records, and after the last one */
    int want_gaps;
    Py_ssize_t max_gaps, n_gaps;
    Py_ssize_t *gaps; /* pairs (first non-filler offset, next record offset), up to max_gaps */
    Py_ssize_t end_pos, tail_first, tail_end;
    int64_t size; /* bytes the file had (as read) */
    int nomem;
    int io_errno; /* a read failed: errno */
} file_stats;

/* load.py's aio_padding: zeros in [start, end) before a record at `end` can be what AIOSequentialFile.writeDirect
 * pads each write with (to its factory's alignment: a power of two of at least 512 that `end` is a multiple of). */
#define AIO_BLOCK 512
static inline int aio_padding(int64_t start, int64_t end) {
    return end % AIO_BLOCK == 0 && end - start < (end & -end);
}

/* The per-file loop of load.py's load_journal. Runs without the GIL: no Python object is touched. */
static void feed_file(LoaderObject *self, wfile *w, int32_t fi, long long tag, int version, int check_tag,
                      file_stats *st) {
    int64_t pos = 16, pf = 16;
    int marked = 0, has_data = 0;
    record_t r;
    int body_start[10];
    for (int t = EVENT; t <= ROLLBACK; t++)
        body_start[t - EVENT] = fixed_size(t, version) - 4;
    int64_t max_id = self->max_id;
    for (;;) {
        int rc = wscan_next(w, &pos, tag, version, check_tag, &marked, &r);
        if (rc == 2) {
            if (wfill(w, pos, w->need) < 0)
                goto ioerr;
            continue;
        }
        if (rc < 0)
            goto ioerr;
        if (rc == 0)
            break;
        int t = r.t;
        const unsigned char *b = w->buf;
        Py_ssize_t rel = (Py_ssize_t)(r.pos - w->base); /* the record's offset in the window */
        /* Stream the window into the cache ahead of the scan: each record's checkSize (and the next header
         * behind it) is a body length away, a jump the hardware prefetcher does not follow. */
        if (pf < w->base)
            pf = w->base;
        for (; pf < pos + 8192 && pf < w->base + w->len; pf += 64)
            __builtin_prefetch(b + (pf - w->base));
        st->records++;
        if (st->type_counts[t - EVENT]++ == 0)
            st->type_order[st->n_types++] = t;
        Py_ssize_t prev_end = st->last_data_pos;
        st->last_data_pos = r.pos + (Py_ssize_t)r.total;
        if (st->want_gaps) {
            w_track_region(w, r.pos);
            /* zeros between two records are damage too, unless AIO padding can explain them (load.aio_padding) */
            int64_t first = w->gap_first >= 0 ? w->gap_first : (r.pos > prev_end && !aio_padding(prev_end, r.pos)
                                                                 ? (int64_t)prev_end : -1);
            if (first >= 0) {
                if (st->n_gaps < st->max_gaps) {
                    st->gaps[2 * st->n_gaps] = (Py_ssize_t)first;
                    st->gaps[2 * st->n_gaps + 1] = r.pos;
                }
                st->n_gaps++;
            }
            w_track_reset(w, st->last_data_pos);
        }
        entry_t e;
        tx_t *tx;
        if (t <= DELETE && t != EVENT) {
            map_prefetch(&self->live_ids, r.rid);
            map_prefetch(&self->deleted, r.rid);
        }
        switch (t) {
        case ADD:
        case UPDATE:
            if (r.rid > max_id)
                max_id = r.rid;
            has_data = 1;
            e.id = r.rid;
            e.user_record_type = (uint8_t)r.utype;
            e.is_update = t == UPDATE;
            e.compact_count = (int8_t)r.cc;
            e.file_index = fi;
            e.body_offset = r.pos + body_start[t - EVENT];
            e.body_len = r.body_len;
            if (append_live(self, &e, -1, t) < 0)
                goto nomem;
            if (t == ADD) {
                if (map_put(&self->live_ids, r.rid, 0) < 0)
                    goto nomem;
            } else if (!map_contains(&self->live_ids, r.rid)) {
                if (note(self, AN_UPDATE_UNKNOWN, fi, r.pos, r.rid, 0, 0, 0) < 0)
                    goto nomem;
            }
            break;
        case DELETE:
            has_data = 1;
            if (!map_del(&self->live_ids, r.rid) && note(self, AN_DELETE_UNKNOWN, fi, r.pos, r.rid, 0, 0, 0) < 0)
                goto nomem;
            if (map_put(&self->deleted, r.rid, 0) < 0)
                goto nomem;
            break;
        case ADD_TX:
        case UPDATE_TX:
        case DELETE_TX:
            if (t != DELETE_TX && r.rid > max_id)
                max_id = r.rid;
            has_data = 1;
            tx = tx_get_or_create(self, r.tx_id);
            if (tx == NULL)
                goto nomem;
            e.id = r.rid;
            /* a DELETE_TX becomes RecordInfo(id, 0, data, isUpdate=true, ..., compactCount) */
            e.user_record_type = t == DELETE_TX ? 0 : (uint8_t)r.utype;
            e.is_update = t != ADD_TX;
            e.compact_count = (int8_t)r.cc;
            e.file_index = fi;
            e.body_offset = r.pos + body_start[t - EVENT];
            e.body_len = r.body_len;
            if (entries_push(t == DELETE_TX ? &tx->dels : &tx->recs, &e) < 0)
                goto nomem;
            tx_inc(tx, fi);
            break;
        case PREPARE: {
            has_data = 1;
            tx = tx_get_or_create(self, r.tx_id); /* empty prepared transactions are allowed */
            if (tx == NULL)
                goto nomem;
            tx->prepared = 1;
            unsigned char *x = malloc(r.extra_len ? (size_t)r.extra_len : 1);
            if (x == NULL)
                goto nomem;
            memcpy(x, b + rel + fixed_size(PREPARE, version) - 4, (size_t)r.extra_len);
            free(tx->extra);
            tx->extra = x;
            tx->extra_len = r.extra_len;
            tx->has_extra = 1;
            tx->has_ploc = 1;
            tx->ploc_file = fi;
            tx->ploc_off = r.pos;
            if (tx_counter_for(tx, fi) != r.nrec) {
                tx->invalid = 1;
                if (note(self, AN_PREPARE_MISMATCH, fi, r.pos, r.tx_id, r.nrec, tx->counter, 0) < 0)
                    goto nomem;
            }
            break;
        }
        case COMMIT: {
            tx = tx_pop(self, r.tx_id);
            if (tx == NULL) {
                if (note(self, AN_COMMIT_UNKNOWN, fi, r.pos, r.tx_id, 0, 0, 0) < 0)
                    goto nomem;
                break;
            }
            has_data = 1;
            int64_t found = tx_counter_for(tx, fi);
            if (found == r.nrec) {
                for (size_t i = 0; i < tx->recs.n; i++) {
                    if (append_live(self, &tx->recs.v[i], tx->tx_id, tx->recs.v[i].is_update ? UPDATE_TX : ADD_TX) < 0 || map_put(&self->live_ids, tx->recs.v[i].id, 0) < 0) {
                        tx_free(tx);
                        goto nomem;
                    }
                }
                for (size_t i = 0; i < tx->dels.n; i++) {
                    map_del(&self->live_ids, tx->dels.v[i].id);
                    if (map_put(&self->deleted, tx->dels.v[i].id, 0) < 0) {
                        tx_free(tx);
                        goto nomem;
                    }
                }
            } else if (note(self, AN_COMMIT_MISMATCH, fi, r.pos, r.tx_id, r.nrec, found,
                            (int64_t)(tx->recs.n + tx->dels.n)) < 0) {
                tx_free(tx);
                goto nomem;
            }
            tx_free(tx);
            break;
        }
        case ROLLBACK:
            tx = tx_pop(self, r.tx_id);
            if (tx == NULL) {
                if (note(self, AN_ROLLBACK_UNKNOWN, fi, r.pos, r.tx_id, 0, 0, 0) < 0)
                    goto nomem;
                break;
            }
            has_data = 1;
            tx_free(tx);
            break;
        default: /* EVENT: the default JournalReaderCallback does nothing, not even hasData */
            break;
        }
    }
    self->max_id = max_id;
    st->marked = marked;
    st->has_data = has_data || marked;
    st->size = w->size;
    if (st->want_gaps) {
        st->end_pos = st->records ? st->last_data_pos : 16;
        w_track_region(w, w->size);
        st->tail_first = (Py_ssize_t)w->gap_first;
        st->tail_end = (Py_ssize_t)w->gap_end_nz;
    }
    /* Entries of deleted ids pile up in churned journals: drop them once they could double the list. */
    if (self->live.n >= 2 * self->compacted + (1 << 20))
        compact_live(self);
    return;
nomem:
    self->max_id = max_id;
    st->nomem = 1;
    return;
ioerr:
    self->max_id = max_id;
    st->io_errno = w->err ? w->err : EIO;
}

static PyObject *Loader_feed(LoaderObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"fd", "file_index", "tag", "version", "check_tag", "gaps", "max_gaps", NULL};
    int fd, fi, version, check_tag = 1, want_gaps = 0;
    long long tag;
    Py_ssize_t max_gaps = 20;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iiLi|ppn:feed", kwlist, &fd, &fi, &tag, &version,
                                     &check_tag, &want_gaps, &max_gaps))
        return NULL;
    if (self->finished || self->busy) {
        PyErr_SetString(PyExc_RuntimeError, self->busy ? "Loader.feed is already running" : "Loader is finished");
        return NULL;
    }
    if (version != 1 && version != 2) {
        PyErr_Format(PyExc_ValueError, "journal format version %d, expected 1 or 2", version);
        return NULL;
    }
    file_stats st;
    memset(&st, 0, sizeof st);
    st.last_data_pos = 16;
    st.want_gaps = want_gaps;
    st.max_gaps = max_gaps < 0 ? 0 : max_gaps;
    if (want_gaps) {
        st.gaps = PyMem_RawMalloc(2 * sizeof(Py_ssize_t) * (size_t)(st.max_gaps ? st.max_gaps : 1));
        if (st.gaps == NULL)
            return PyErr_NoMemory();
    }
    wfile w;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    if (wopen(&w, fd, self->wbuf, self->wcap, self->window, want_gaps) < 0)
        st.io_errno = w.err;
    else
        feed_file(self, &w, fi, tag, version, check_tag, &st);
    Py_END_ALLOW_THREADS
    self->wbuf = w.buf; /* wfill may have grown it */
    self->wcap = w.cap;
    self->busy = 0;
    if (st.nomem || st.io_errno) {
        PyMem_RawFree(st.gaps);
        self->finished = 1; /* the state is incomplete: refuse to go on */
        if (st.nomem || st.io_errno == ENOMEM)
            return PyErr_NoMemory();
        errno = st.io_errno;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *counts = PyList_New(st.n_types);
    if (counts == NULL)
        goto fail;
    for (int i = 0; i < st.n_types; i++) {
        int t = st.type_order[i];
        PyObject *pair = Py_BuildValue("(in)", t, st.type_counts[t - EVENT]);
        if (pair == NULL) {
            Py_DECREF(counts);
            goto fail;
        }
        PyList_SET_ITEM(counts, i, pair);
    }
    PyObject *gaps = Py_None;
    Py_INCREF(gaps);
    if (want_gaps) {
        Py_ssize_t shown = st.n_gaps < st.max_gaps ? st.n_gaps : st.max_gaps;
        PyObject *list = PyList_New(shown);
        if (list == NULL) {
            Py_DECREF(counts);
            Py_DECREF(gaps);
            goto fail;
        }
        for (Py_ssize_t i = 0; i < shown; i++) {
            PyObject *pair = Py_BuildValue("(nn)", st.gaps[2 * i], st.gaps[2 * i + 1]);
            if (pair == NULL) {
                Py_DECREF(list);
                Py_DECREF(counts);
                Py_DECREF(gaps);
                goto fail;
            }
            PyList_SET_ITEM(list, i, pair);
        }
        Py_DECREF(gaps);
        gaps = Py_BuildValue("(Nnnnn)", list, st.n_gaps, st.end_pos, st.tail_first, st.tail_end);
        if (gaps == NULL) {
            Py_DECREF(counts);
            goto fail;
        }
    }
    PyMem_RawFree(st.gaps);
    return Py_BuildValue("(nOOnNNL)", st.records, st.marked ? Py_True : Py_False,
                         st.has_data ? Py_True : Py_False, st.last_data_pos, counts, gaps, (long long)st.size);
fail:
    PyMem_RawFree(st.gaps);
    return NULL;
}

static int cmp_tx_seq(const void *a, const void *b) {
    const tx_t *x = *(tx_t *const *)a, *y = *(tx_t *const *)b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static PyObject *entries_bytes(const entries_t *a) {
    return PyBytes_FromStringAndSize((const char *)a->v, (Py_ssize_t)(a->n * sizeof(entry_t)));
}

static PyObject *Loader_finish(LoaderObject *self, PyObject *noargs) {
    if (self->finished || self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Loader is finished");
        return NULL;
    }
    compact_live(self);
    /* shrink the live list to its size: it is what stays in memory while callers use the result */
    if (self->live.n && self->live.n < self->live.cap) {
        entry_t *v = realloc(self->live.v, self->live.n * sizeof(entry_t));
        if (v != NULL) {
            self->live.v = v;
            self->live.cap = self->live.n;
        }
        if (self->want_sources && self->sources.n < self->sources.cap) {
            source_t *sv = realloc(self->sources.v, self->sources.n * sizeof(source_t));
            if (sv != NULL) {
                self->sources.v = sv;
                self->sources.cap = self->sources.n;
            }
        }
    }
    map_free(&self->deleted);

    /* transactions still open, in first-seen order */
    size_t ntx = map_size(&self->txs), k = 0;
    tx_t **open = PyMem_Malloc((ntx ? ntx : 1) * sizeof(tx_t *));
    if (open == NULL)
        return PyErr_NoMemory();
    if (self->txs.has_min)
        open[k++] = (tx_t *)(intptr_t)self->txs.min_val;
    for (size_t i = 0; i < self->txs.cap; i++)
        if (self->txs.keys[i] != EMPTY_KEY)
            open[k++] = (tx_t *)(intptr_t)self->txs.vals[i];
    qsort(open, ntx, sizeof(tx_t *), cmp_tx_seq);
    PyObject *txs = PyList_New((Py_ssize_t)ntx);
    if (txs == NULL) {
        PyMem_Free(open);
        return NULL;
    }
    for (size_t i = 0; i < ntx; i++) {
        tx_t *tx = open[i];
        PyObject *extra, *ploc;
        if (tx->has_extra)
            extra = PyBytes_FromStringAndSize((const char *)tx->extra, tx->extra_len);
        else
            extra = Py_NewRef(Py_None);
        if (tx->has_ploc)
            ploc = Py_BuildValue("(iL)", (int)tx->ploc_file, (long long)tx->ploc_off);
        else
            ploc = Py_NewRef(Py_None);
        PyObject *item = NULL;
        if (extra != NULL && ploc != NULL)
            item = Py_BuildValue("(LNNOONN)", (long long)tx->tx_id, entries_bytes(&tx->recs),
                                 entries_bytes(&tx->dels), tx->prepared ? Py_True : Py_False,
                                 tx->invalid ? Py_True : Py_False, extra, ploc);
        else {
            Py_XDECREF(extra);
            Py_XDECREF(ploc);
        }
        if (item == NULL) {
            Py_DECREF(txs);
            PyMem_Free(open);
            return NULL;
        }
        PyList_SET_ITEM(txs, (Py_ssize_t)i, item);
    }
    PyMem_Free(open);

    PyObject *anomalies = PyList_New((Py_ssize_t)self->n_anomalies);
    if (anomalies == NULL) {
        Py_DECREF(txs);
        return NULL;
    }
    for (size_t i = 0; i < self->n_anomalies; i++) {
        anomaly_t *a = &self->anomalies[i];
        PyObject *item = Py_BuildValue("(siLLLLL)", anomaly_names[a->code], (int)a->fi, (long long)a->off,
                                       (long long)a->a, (long long)a->b, (long long)a->c, (long long)a->d);
        if (item == NULL) {
            Py_DECREF(txs);
            Py_DECREF(anomalies);
            return NULL;
        }
        PyList_SET_ITEM(anomalies, (Py_ssize_t)i, item);
    }
    /* anomaly counts in first-seen order (dict order in load.py) */
    PyObject *counts = PyList_New(self->n_count_order);
    if (counts == NULL) {
        Py_DECREF(txs);
        Py_DECREF(anomalies);
        return NULL;
    }
    for (int i = 0; i < self->n_count_order; i++) {
        int code = self->count_order[i];
        PyObject *pair = Py_BuildValue("(sn)", anomaly_names[code], self->counts[code]);
        if (pair == NULL) {
            Py_DECREF(txs);
            Py_DECREF(anomalies);
            Py_DECREF(counts);
            return NULL;
        }
        PyList_SET_ITEM(counts, i, pair);
    }
    self->finished = 1;
    return Py_BuildValue("(nLnNNN)", (Py_ssize_t)self->live.n, (long long)self->max_id,
                         (Py_ssize_t)map_size(&self->live_ids), txs, anomalies, counts);
}

static int Loader_init(LoaderObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"max_examples", "sources", "window", NULL};
    Py_ssize_t max_examples = 100, window = 4 << 20;
    int want_sources = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|npn:Loader", kwlist, &max_examples, &want_sources, &window))
        return -1;
    self->window = window < WINDOW_MIN ? WINDOW_MIN : window;
    if (self->live.v != NULL || self->txs.cap != 0 || self->finished) {
        PyErr_SetString(PyExc_RuntimeError, "Loader cannot be re-initialised");
        return -1;
    }
    self->max_examples = max_examples < 0 ? 0 : max_examples;
    self->want_sources = want_sources;
    self->max_id = -1;
    self->txs.is_map = 1;
    return 0;
}

static void Loader_dealloc(LoaderObject *self) {
    free(self->live.v);
    free(self->sources.v);
    map_free(&self->deleted);
    map_free(&self->live_ids);
    if (self->txs.has_min)
        tx_free((tx_t *)(intptr_t)self->txs.min_val);
    for (size_t i = 0; i < self->txs.cap; i++)
        if (self->txs.keys[i] != EMPTY_KEY)
            tx_free((tx_t *)(intptr_t)self->txs.vals[i]);
    map_free(&self->txs);
    free(self->anomalies);
    free(self->wbuf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The live list, read-only, once finish() has run. */
static int Loader_getbuffer(LoaderObject *self, Py_buffer *view, int flags) {
    if (!self->finished || self->busy) {
        PyErr_SetString(PyExc_BufferError, "the live list exists once Loader.finish() has run");
        return -1;
    }
    static char empty;
    void *buf = self->live.v ? (void *)self->live.v : (void *)&empty;
    if (PyBuffer_FillInfo(view, (PyObject *)self, buf, (Py_ssize_t)(self->live.n * sizeof(entry_t)), 1, flags) < 0)
        return -1;
    self->exports++;
    return 0;
}

static void Loader_releasebuffer(LoaderObject *self, Py_buffer *view) { self->exports--; }

static PyBufferProcs Loader_as_buffer = {(getbufferproc)Loader_getbuffer, (releasebufferproc)Loader_releasebuffer};

static PyObject *Loader_sources(LoaderObject *self, PyObject *noargs) {
    if (!self->finished || self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the sources exist once Loader.finish() has run");
        return NULL;
    }
    if (!self->want_sources) {
        PyErr_SetString(PyExc_RuntimeError, "the Loader was created without sources=True");
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)self->sources.v, (Py_ssize_t)(self->sources.n * sizeof(source_t)));
}

static PyMethodDef Loader_methods[] = {
    {"feed", (PyCFunction)(void (*)(void))Loader_feed, METH_VARARGS | METH_KEYWORDS,
     "feed(fd, file_index, tag, version, check_tag=True, gaps=False, max_gaps=20)\n"
     "-> (records, marked, has_data, last_data_pos, [(type, count)...], gaps, size)\n"
     "Read one open journal file (the next in load order) through the Loader's window and apply its\n"
     "records; size is the file's size as read. gaps (when asked) is ([(first_non_filler, next_record)...],\n"
     "damaged_regions, end_of_last_record, first_non_filler_after, end_of_last_non_zero_after). A failed\n"
     "read raises OSError and ends the Loader."},
    {"finish", (PyCFunction)Loader_finish, METH_NOARGS,
     "finish() -> (live_count, max_id, number_of_records, [(tx_id, records, deletes, prepared, invalid,\n"
     "extra, prepare_location)...], [(code, file_index, offset, a, b, c, d)...], [(code, count)...])\n"
     "End the load; the Loader then exports the live list (LIVE_FORMAT entries) as a buffer."},
    {"sources", (PyCFunction)Loader_sources, METH_NOARGS,
     "sources() -> bytes: one SOURCE_FORMAT entry (tx_id, record type) per live entry, in list order\n"
     "(Loader(sources=True) only, after finish()): the transaction id is -1 for ADD/UPDATE."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject amq_LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "amqtool._native.Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_dealloc = (destructor)Loader_dealloc,
    .tp_as_buffer = &Loader_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Loader(max_examples=100, sources=False): JournalImpl.load over files fed one at a time (see journal_load.c).",
    .tp_methods = Loader_methods,
    .tp_init = (initproc)Loader_init,
    .tp_new = PyType_GenericNew,
};

/* Called from PyInit__native: make Loader and LIVE_FORMAT module attributes. */
int amq_add_loader(PyObject *module) {
    if (PyType_Ready(&amq_LoaderType) < 0)
        return -1;
    Py_INCREF(&amq_LoaderType);
    if (PyModule_AddObject(module, "Loader", (PyObject *)&amq_LoaderType) < 0) {
        Py_DECREF(&amq_LoaderType);
        return -1;
    }
    if (sizeof(entry_t) != 27) {
        PyErr_SetString(PyExc_ImportError, "live entry is not packed to 27 bytes");
        return -1;
    }
    if (sizeof(source_t) != 9) {
        PyErr_SetString(PyExc_ImportError, "live source entry is not packed to 9 bytes");
        return -1;
    }
    if (PyModule_AddStringConstant(module, "SOURCE_FORMAT", "=qB") < 0)
        return -1;
    return PyModule_AddStringConstant(module, "LIVE_FORMAT", "=qB?biqi");
}
