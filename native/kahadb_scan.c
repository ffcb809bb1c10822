/* KahaDB journal files (db-N.log): the batch scan, Adler-32, and the replay's fast path.
 *
 * kahadb_scan_file(buf, file_id, checksums, last_update, hooks, verified=0) does, over one mapped journal file, what
 * amqtool/engines/kahadb/load.py does record by record in Python (the reference, kept as the fallback and
 * held identical to this by tests/native/test_kahadb_native.py):
 *
 *  1. the broker's start-up batch scan (Journal.recoveryCheck; kahadb-format.md §2.3, §3.1), mirroring
 *     amqtool.formats.kahadb.journal.scan_file branch by branch: batch control records, the Adler-32 of
 *     each batch, corrupted ranges resumed at the next batch header, the logical end (EOF marker, zero
 *     batch, zero header, physical end, corrupt tail);
 *  2. the user records of every good batch (journal.iter_batch_records: they must tile the batch);
 *  3. for each record, either the fast path or a call back into Python.  The fast path takes the two
 *     commands that make up nearly every journal, KAHA_ADD_MESSAGE and KAHA_REMOVE_MESSAGE without a
 *     transaction (and the checkpoint's TRACE, PRODUCER_AUDIT and ACK_MESSAGE_FILE_MAP, which only need
 *     their framing checked and their location kept), extracts the few fields the replay needs (destination, messageId, priority,
 *     subscriptionKey; the OpenWire message itself is not decoded: only live messages are, later) and
 *     applies them to the Replay's own dicts (replay.py rules 1 and 2).  Anything else (other commands,
 *     transactions, unknown fields, odd varints, invalid UTF-8, a destination that does not decode, a
 *     file being skipped after REWRITTEN_DATA_FILE) goes to hooks.slow(offset, length), which decodes
 *     and applies it exactly as the Python path does.  The fast path never decides anything the Python
 *     decoder would decide differently: when in doubt it hands the record over.
 *
 * A live message added by the fast path is stored under its message id as a KahaLiveEntry (file_id,
 * offset, length, priority, waiting, transaction=None: read-only, a third of the allocations of a tuple);
 * Replay turns it into a LiveMessage before changing it and when the load is done (Replay.materialize).
 *
 * hooks = (destinations, resolve, ensure, slow, Subscription):
 *   destinations  Replay.destinations (dict "<type>:<name>" -> DestinationState)
 *   resolve(raw)  KahaDestination bytes -> ("<type>:<name>", type) or None when they do not decode
 *   ensure(raw)   the DestinationState for those bytes, created if absent (Replay._dest)
 *   slow(o, n)    decode and apply the record at offset o of total length n; returns True when the
 *                 rest of the file must be skipped (Replay.skip_file)
 *   Subscription  replay.Subscription, for the durable subscriptions the fast path starts
 *
 * Returns (batches, data_bytes, records, corrupt, bad_records, end, counts, after, first_after,
 *          last_offset, unknown_removes, last_audit, last_ack, ack_blob):
 *   corrupt      [(first, last, reason, to_eof, stored|None, computed|None)]
 *   bad_records  [(code, offset, batch_offset, batch_end, value)]: 1 header crosses the batch end
 *                (value = bytes left), 2 record type not 1 (value = type), 3 length does not fit (value =
 *                length); journal.tiling_error() words them
 *   end          (offset, how)
 *   counts       17 ints: fast-path records per KahaEntryType (slow ones are counted by Replay.apply)
 *   after        records after last_update (a (file id, offset) tuple or None); first_after the offset
 *                of the first of them in this file or -1; last_offset the last record's offset or -1
 *   last_audit, last_ack, ack_blob: offsets of the newest PRODUCER_AUDIT / ACK_MESSAGE_FILE_MAP taken by
 *                the fast path (-1 = none) and that ack map's blob (bytes, or None)
 */
#include "amqnative.h"

#include <stdint.h>
#include <string.h>

#include "structmember.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#endif

/* ---------------------------------------------------------------------------------------------------
 * Adler-32 (java.util.zip.Adler32 = zlib.adler32): s1 = 1 + sum of bytes, s2 = sum of the s1 values,
 * both mod 65521.  NMAX is the longest run whose sums cannot overflow 32 bits before the reduction.
 */
#define ADLER_BASE 65521u
#define ADLER_NMAX 5552

static uint32_t adler32_scalar(uint32_t adler, const unsigned char *p, size_t len) {
    uint32_t a = adler & 0xffff, b = adler >> 16;
    while (len > 0) {
        size_t n = len < ADLER_NMAX ? len : ADLER_NMAX;
        len -= n;
        while (n >= 8) {
            a += p[0]; b += a; a += p[1]; b += a; a += p[2]; b += a; a += p[3]; b += a;
            a += p[4]; b += a; a += p[5]; b += a; a += p[6]; b += a; a += p[7]; b += a;
            p += 8;
            n -= 8;
        }
        while (n-- > 0) {
            a += *p++;
            b += a;
        }
        a %= ADLER_BASE;
        b %= ADLER_BASE;
    }
    return (b << 16) | a;
}

#ifdef HAVE_AVX2_PATH
/* 32 bytes per step.  For a block b[0..31] entered with running sum S:
 *   s1 += sum(b);  s2 += 32*S + sum((32-i) * b[i]).
 * S is the incoming s1 plus the byte sums of the earlier blocks of the run; the vector `prev` keeps the
 * latter (per lane), multiplied by 32 at the end of the run.  A run is at most NMAX bytes, so every lane
 * and the total stay below 2^32; the final sums are taken in 64 bits. */
__attribute__((target("avx2"))) static uint32_t adler32_avx2(uint32_t adler, const unsigned char *p, size_t len) {
    uint32_t a = adler & 0xffff, b = adler >> 16;
    const __m256i zero = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i weights = _mm256_setr_epi8(32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
                                             15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
    while (len >= 32) {
        size_t blocks = len / 32;
        if (blocks > ADLER_NMAX / 32)
            blocks = ADLER_NMAX / 32;
        len -= blocks * 32;
        __m256i vs1 = zero, vs2 = zero, prev = zero;
        for (size_t i = 0; i < blocks; i++) {
            /* Mapped page-cache pages: the hardware prefetcher stops at every 4 KiB page boundary, so ask
             * for the data a page ahead (a prefetch never faults, even past the end). */
            if ((i & 1) == 0)
                _mm_prefetch((const char *)p + 4096, _MM_HINT_T0);
            __m256i v = _mm256_loadu_si256((const __m256i *)p);
            prev = _mm256_add_epi32(prev, vs1);
            vs1 = _mm256_add_epi32(vs1, _mm256_sad_epu8(v, zero));
            vs2 = _mm256_add_epi32(vs2, _mm256_madd_epi16(_mm256_maddubs_epi16(v, weights), ones));
            p += 32;
        }
        vs2 = _mm256_add_epi32(vs2, _mm256_slli_epi32(prev, 5));
        uint32_t l1[8], l2[8];
        _mm256_storeu_si256((__m256i *)l1, vs1);
        _mm256_storeu_si256((__m256i *)l2, vs2);
        uint64_t t1 = 0, t2 = 0;
        for (int i = 0; i < 8; i++) {
            t1 += l1[i];
            t2 += l2[i];
        }
        t2 += (uint64_t)a * 32 * blocks + b;
        a = (uint32_t)((a + t1) % ADLER_BASE);
        b = (uint32_t)(t2 % ADLER_BASE);
    }
    return adler32_scalar((b << 16) | a, p, len);
}
#endif

static uint32_t adler32(uint32_t adler, const unsigned char *p, size_t len) {
    adler = (((adler >> 16) % ADLER_BASE) << 16) | ((adler & 0xffff) % ADLER_BASE); /* as zlib: any start value */
#ifdef HAVE_AVX2_PATH
    static int avx2 = -1;
    if (avx2 < 0) {
        __builtin_cpu_init();
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    if (avx2)
        return adler32_avx2(adler, p, len);
#endif
    return adler32_scalar(adler, p, len);
}

PyObject *amq_adler32(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long value = 1;
    if (!PyArg_ParseTuple(args, "y*|k:adler32", &view, &value))
        return NULL;
    uint32_t r = adler32((uint32_t)value, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(r);
}

/* ---------------------------------------------------------------------------------------------------
 * Framing constants (kahadb-format.md §2.1).
 */
#define HEAD 5
#define CONTROL_SIZE 28
#define MAX_BATCH_SIZE (INT32_MAX - 33)
static const unsigned char CONTROL_HEADER[16] = {0, 0, 0, 0x1c, 2, 'W', 'R', 'I', 'T', 'E', ' ', 'B', 'A', 'T', 'C', 'H'};
static const unsigned char EOF_RECORD[5] = {'-', 'q', 'M', 'a', '4'};
static const unsigned char ZERO_HEADER[5] = {0, 0, 0, 0, 0};

enum {
    ENTRY_TYPES = 17, TRACE = 0, ADD_MESSAGE = 1, REMOVE_MESSAGE = 2, SUBSCRIPTION = 7, PRODUCER_AUDIT = 8,
    ACK_MESSAGE_FILE_MAP = 9
};

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4));
}

/* buf.find(CONTROL_HEADER, start): the header's only 0x1c byte is its 4th, so look for that. */
static Py_ssize_t find_header(const unsigned char *b, Py_ssize_t n, Py_ssize_t start) {
    Py_ssize_t i = start + 3;
    while (i < n) {
        const unsigned char *q = memchr(b + i, 0x1c, (size_t)(n - i));
        if (q == NULL)
            return -1;
        Py_ssize_t pos = (q - b) - 3;
        if (pos + 16 <= n && memcmp(b + pos, CONTROL_HEADER, 16) == 0)
            return pos;
        i = (q - b) + 1;
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------------------
 * Protobuf, only as far as the fast path goes.  Anything the Python reader (formats/kahadb/protobuf.py)
 * would treat specially makes the record "slow": multi-byte tags (every schema field of these commands
 * has a one-byte tag), varints of 10 bytes (their value may not fit 64 bits), lengths past the message.
 */
typedef struct {
    const unsigned char *p, *end;
} pb_t;

static inline int pb_varint(pb_t *s, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 63; shift += 7) {
        if (s->p >= s->end)
            return 0;
        unsigned c = *s->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0; /* 10 bytes or more: leave it to Python */
}

/* One field: 1 = read (field, wt, and either value or [data, data+len)), 0 = end, -1 = slow. */
static inline int pb_field(pb_t *s, int *field, int *wt, uint64_t *value, const unsigned char **data) {
    if (s->p >= s->end)
        return 0;
    unsigned tag = *s->p;
    if (tag >= 0x80 || (tag >> 3) == 0)
        return -1;
    s->p++;
    *field = (int)(tag >> 3);
    *wt = (int)(tag & 7);
    if (*wt == 0)
        return pb_varint(s, value) ? 1 : -1;
    if (*wt == 2) {
        uint64_t n;
        if (!pb_varint(s, &n) || n > (uint64_t)(s->end - s->p))
            return -1;
        *data = s->p;
        *value = n;
        s->p += n;
        return 1;
    }
    return -1; /* fixed32/64 and groups: no field of these commands has them */
}

static inline int32_t to_int32(uint64_t v) { return (int32_t)(uint32_t)v; }

typedef struct {
    int type;                       /* ADD_MESSAGE, REMOVE_MESSAGE, TRACE, PRODUCER_AUDIT, ACK_MESSAGE_FILE_MAP */
    const unsigned char *dest;      /* KahaDestination bytes */
    Py_ssize_t dest_len;
    const unsigned char *mid;       /* messageId */
    Py_ssize_t mid_len;
    const unsigned char *sub;       /* subscriptionKey (REMOVE) or NULL */
    Py_ssize_t sub_len;
    int32_t priority;
    const unsigned char *text;      /* TRACE message, blob of PRODUCER_AUDIT / ACK_MESSAGE_FILE_MAP (or NULL),
                                       subscriptionInfo of SUBSCRIPTION */
    Py_ssize_t text_len;
    int retroactive;                /* SUBSCRIPTION */
    int unmatched;                  /* REMOVE: a zero-length ack, MessageDatabase's UNMATCHED marker */
} fast_t;

/* KahaSubscriptionCommand: destination (1), subscriptionKey (2, here in sub), retroactive (3),
 * subscriptionInfo (4).  Without subscriptionInfo it removes the subscription: Python does that. */
static int parse_subscription(pb_t *s, fast_t *f) {
    int field, wt, r, have = 0;
    uint64_t v;
    const unsigned char *d = NULL;
    f->type = SUBSCRIPTION;
    f->dest = f->sub = f->text = NULL;
    f->dest_len = f->sub_len = f->text_len = 0;
    f->retroactive = 0;
    while ((r = pb_field(s, &field, &wt, &v, &d)) == 1) {
        if (field == 1 && wt == 2 && !(have & 1)) {
            f->dest = d;
            f->dest_len = (Py_ssize_t)v;
            have |= 1;
        } else if (field == 2 && wt == 2 && !(have & 2)) {
            f->sub = d;
            f->sub_len = (Py_ssize_t)v;
            have |= 2;
        } else if (field == 3 && wt == 0) {
            f->retroactive = v != 0;
        } else if (field == 4 && wt == 2) {
            f->text = d;
            f->text_len = (Py_ssize_t)v;
            have |= 4;
        } else {
            return 0; /* repeated destination or key, or a field the schema does not have */
        }
    }
    return r == 0 && have == 7;
}

/* TRACE (one string, field 1) and the two one-blob commands (field 1, bytes; the last occurrence wins
 * as in commands._decode_blob).  A repeated TRACE message goes to Python: it validates each one. */
static int parse_single(int etype, pb_t *s, fast_t *f) {
    int field, wt, r;
    uint64_t v;
    const unsigned char *d = NULL;
    f->type = etype;
    f->text = NULL;
    f->text_len = 0;
    while ((r = pb_field(s, &field, &wt, &v, &d)) == 1) {
        if (field != 1 || wt != 2 || (etype == TRACE && f->text != NULL))
            return 0;
        f->text = d;
        f->text_len = (Py_ssize_t)v;
    }
    return r == 0;
}

/* Parse a user-record payload (entry type byte, varint length, body) for the fast path. */
static int parse_fast(const unsigned char *p, Py_ssize_t n, fast_t *f) {
    if (n < 2)
        return 0;
    int etype = p[0];
    if (etype != ADD_MESSAGE && etype != REMOVE_MESSAGE && etype != TRACE && etype != PRODUCER_AUDIT &&
        etype != ACK_MESSAGE_FILE_MAP && etype != SUBSCRIPTION)
        return 0;
    pb_t s = {p + 1, p + n};
    uint64_t body_len;
    if (!pb_varint(&s, &body_len) || body_len != (uint64_t)(s.end - s.p))
        return 0;
    if (etype == SUBSCRIPTION)
        return parse_subscription(&s, f);
    if (etype != ADD_MESSAGE && etype != REMOVE_MESSAGE)
        return parse_single(etype, &s, f);
    f->type = etype;
    f->dest = f->mid = f->sub = NULL;
    f->dest_len = f->mid_len = f->sub_len = 0;
    f->priority = 4;
    f->unmatched = 0;
    int have = 0, field, wt, r;
    uint64_t v;
    const unsigned char *d = NULL;
    while ((r = pb_field(&s, &field, &wt, &v, &d)) == 1) {
        /* A repeated destination, messageId or subscriptionKey: Python decodes (and may reject) every
         * occurrence, the last one wins; leave that to it. */
        if (field == 2 && wt == 2) {
            if (have & 1)
                return 0;
            f->dest = d;
            f->dest_len = (Py_ssize_t)v;
            have |= 1;
        } else if (field == 3 && wt == 2) {
            if (have & 2)
                return 0;
            f->mid = d;
            f->mid_len = (Py_ssize_t)v;
            have |= 2;
        } else if (field == 4 && wt == 2) {
            have |= 4; /* ADD: the OpenWire message; REMOVE: the ack (neither is decoded here) */
            f->unmatched = v == 0;
        } else if (etype == ADD_MESSAGE && field == 5 && wt == 0) {
            f->priority = to_int32(v);
        } else if (etype == ADD_MESSAGE && field == 6 && wt == 0) {
            /* priority_supported: not used by the replay */
        } else if (etype == REMOVE_MESSAGE && field == 5 && wt == 2) {
            if (f->sub != NULL)
                return 0;
            f->sub = d;
            f->sub_len = (Py_ssize_t)v;
        } else {
            return 0; /* transaction_info (field 1) or a field the schema does not have */
        }
    }
    if (r < 0)
        return 0;
    return etype == ADD_MESSAGE ? have == 7 : (have & 3) == 3;
}

/* ---------------------------------------------------------------------------------------------------
 * A live message stored by the fast path: one small object (file_id, offset, length, priority, waiting),
 * read-only, not tracked by the GC (it only ever refers to a set of str, which cannot refer back).
 * Replay reads it like a LiveMessage and converts it before changing it (replay.py).
 */
typedef struct {
    PyObject_HEAD
    long file_id;
    Py_ssize_t offset, length;
    int priority;
    PyObject *waiting; /* set of subscription keys (topics) or NULL (queues) */
} entry_t;

static void entry_dealloc(PyObject *self) {
    Py_XDECREF(((entry_t *)self)->waiting);
    PyObject_Free(self);
}

static PyObject *entry_transaction(PyObject *self, void *closure) { Py_RETURN_NONE; }

static PyMemberDef entry_members[] = {
    {"file_id", T_LONG, offsetof(entry_t, file_id), READONLY, NULL},
    {"offset", T_PYSSIZET, offsetof(entry_t, offset), READONLY, NULL},
    {"length", T_PYSSIZET, offsetof(entry_t, length), READONLY, NULL},
    {"priority", T_INT, offsetof(entry_t, priority), READONLY, NULL},
    {"waiting", T_OBJECT, offsetof(entry_t, waiting), READONLY, "subscription keys still waiting, or None"},
    {NULL},
};

static PyGetSetDef entry_getset[] = {
    {"transaction", entry_transaction, NULL, "always None: the fast path takes no transactional record", NULL},
    {NULL},
};

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "amqtool._native.KahaLiveEntry",
    .tp_doc = "A live KahaDB message as the fast path stores it (see replay.py).",
    .tp_basicsize = sizeof(entry_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = entry_dealloc,
    .tp_members = entry_members,
    .tp_getset = entry_getset,
};

static PyObject *entry_new(long file_id, Py_ssize_t offset, Py_ssize_t length, int priority, PyObject *waiting) {
    entry_t *e = PyObject_Malloc(sizeof(entry_t));
    if (e == NULL)
        return PyErr_NoMemory();
    PyObject_Init((PyObject *)e, &EntryType);
    e->file_id = file_id;
    e->offset = offset;
    e->length = length;
    e->priority = priority;
    e->waiting = waiting; /* stolen */
    return (PyObject *)e;
}

/* ---------------------------------------------------------------------------------------------------
 * Destinations: a small direct-mapped memo from KahaDestination bytes to the key, type and the current
 * DestinationState (checked against Replay.destinations on every use: Python code may drop or create it).
 */
#define MEMO 128

typedef struct {
    unsigned char *raw;
    Py_ssize_t len;
    PyObject *key;      /* "<type>:<name>" */
    int dtype;
    PyObject *state;    /* DestinationState last seen under key (or NULL), with its two dicts */
    PyObject *messages;
    PyObject *subs;
    long long gen;      /* ctx gen when state was last checked against Replay.destinations */
} memo_t;

typedef struct {
    PyObject *destinations, *resolve, *ensure, *slow, *subscription_cls;
    long long gen; /* bumped after every call into Python (the only code that changes destinations) */
    memo_t memo[MEMO];
    long long counts[ENTRY_TYPES];
    long long unknown_removes;
    Py_ssize_t last_audit, last_ack;         /* offsets of the newest fast-path records, or -1 */
    const unsigned char *ack_blob;           /* the newest ack map's blob (NULL = absent, b"") */
    Py_ssize_t ack_blob_len;
} ctx_t;

static void memo_clear_entry(memo_t *m) {
    PyMem_Free(m->raw);
    m->raw = NULL;
    Py_CLEAR(m->key);
    Py_CLEAR(m->state);
    Py_CLEAR(m->messages);
    Py_CLEAR(m->subs);
}

/* The memo entry for these destination bytes; NULL with no error set = they do not decode (slow). */
static memo_t *memo_get(ctx_t *c, const unsigned char *raw, Py_ssize_t len) {
    /* Slot from the length and the first and last 8 bytes (the name's end); a collision costs a resolve. */
    uint64_t h = (uint64_t)len * 0x9E3779B97F4A7C15ull;
    if (len >= 8) {
        uint64_t x, y;
        memcpy(&x, raw, 8);
        memcpy(&y, raw + len - 8, 8);
        h ^= x * 0xC2B2AE3D27D4EB4Full ^ y * 0x165667B19E3779F9ull;
    } else {
        for (Py_ssize_t i = 0; i < len; i++)
            h = (h ^ raw[i]) * 0x100000001B3ull;
    }
    h ^= h >> 29;
    h ^= h >> 17;
    memo_t *m = &c->memo[(h ^ (h >> 7)) & (MEMO - 1)];
    if (m->raw != NULL && m->len == len && memcmp(m->raw, raw, (size_t)len) == 0)
        return m;
    PyObject *res = PyObject_CallFunction(c->resolve, "y#", (const char *)raw, len);
    if (res == NULL)
        return NULL;
    if (res == Py_None) {
        Py_DECREF(res);
        return NULL;
    }
    PyObject *key;
    int dtype;
    if (!PyArg_ParseTuple(res, "Ui", &key, &dtype)) {
        Py_DECREF(res);
        return NULL;
    }
    unsigned char *copy = PyMem_Malloc(len ? (size_t)len : 1);
    if (copy == NULL) {
        Py_DECREF(res);
        PyErr_NoMemory();
        return NULL;
    }
    memo_clear_entry(m);
    memcpy(copy, raw, (size_t)len);
    m->gen = -1;
    m->raw = copy;
    m->len = len;
    Py_INCREF(key);
    m->key = key;
    m->dtype = dtype;
    Py_DECREF(res);
    return m;
}

/* Point the entry at the DestinationState currently under its key (or none); -1 on error. */
static int memo_refresh(memo_t *m, PyObject *state) {
    Py_CLEAR(m->state);
    Py_CLEAR(m->messages);
    Py_CLEAR(m->subs);
    if (state == NULL)
        return 0;
    PyObject *msgs = PyObject_GetAttrString(state, "messages");
    if (msgs == NULL)
        return -1;
    PyObject *subs = PyObject_GetAttrString(state, "subscriptions");
    if (subs == NULL) {
        Py_DECREF(msgs);
        return -1;
    }
    if (!PyDict_CheckExact(msgs) || !PyDict_CheckExact(subs)) {
        Py_DECREF(msgs);
        Py_DECREF(subs);
        PyErr_SetString(PyExc_TypeError, "DestinationState.messages/subscriptions must be dicts");
        return -1;
    }
    Py_INCREF(state);
    m->state = state;
    m->messages = msgs;
    m->subs = subs;
    return 0;
}

/* The current state for the entry's key; *st = NULL when there is none.  -1 on error. */
static int memo_state(ctx_t *c, memo_t *m, int create, const unsigned char *raw, Py_ssize_t len) {
    /* Only Python code changes Replay.destinations; none has run since the entry was last checked. */
    if (m->gen == c->gen && (m->state != NULL || !create))
        return 0;
    m->gen = c->gen;
    PyObject *cur = PyDict_GetItemWithError(c->destinations, m->key);
    if (cur == NULL && PyErr_Occurred())
        return -1;
    if (cur == NULL && create) {
        PyObject *st = PyObject_CallFunction(c->ensure, "y#", (const char *)raw, len);
        m->gen = ++c->gen;
        if (st == NULL)
            return -1;
        int r = memo_refresh(m, st);
        Py_DECREF(st);
        return r;
    }
    if (cur != m->state)
        return memo_refresh(m, cur);
    return 0;
}

/* Replay rule 4 for a KAHA_SUBSCRIPTION with subscriptionInfo (replay.py, Replay.apply): the
 * subscription starts here, or keeps its start when the record is a re-write of an existing one (GC moves
 * subscription records to the journal's tail); a new retroactive one also wants every stored topic
 * message.  1 = applied, 0 = hand it to Python, -1 = error. */
static int apply_subscription(ctx_t *c, const fast_t *f, memo_t *m, long file_id, Py_ssize_t offset) {
    PyObject *key = PyUnicode_DecodeUTF8((const char *)f->sub, f->sub_len, NULL);
    if (key == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    int rc = -1;
    PyObject *start = NULL, *info = NULL, *sub = NULL;
    c->counts[SUBSCRIPTION]++;
    if (memo_state(c, m, 1, f->dest, f->dest_len) < 0)
        goto done;
    PyObject *old = PyDict_GetItemWithError(m->subs, key);
    if (old == NULL && PyErr_Occurred())
        goto done;
    start = old != NULL ? PyObject_GetAttrString(old, "start") : Py_BuildValue("(ln)", file_id, offset);
    info = PyBytes_FromStringAndSize((const char *)f->text, f->text_len);
    if (start == NULL || info == NULL)
        goto done;
    int new_retroactive = f->retroactive && old == NULL;
    sub = PyObject_CallFunction(c->subscription_cls, "OlnOOO", key, file_id, offset, start,
                                f->retroactive ? Py_True : Py_False, info);
    c->gen++; /* Python code ran */
    if (sub == NULL || PyDict_SetItem(m->subs, key, sub) < 0)
        goto done;
    if (new_retroactive) {
        Py_ssize_t i = 0;
        PyObject *mid, *msg;
        while (PyDict_Next(m->messages, &i, &mid, &msg)) {
            PyObject *waiting;
            if (Py_IS_TYPE(msg, &EntryType)) {
                waiting = ((entry_t *)msg)->waiting;
                Py_XINCREF(waiting);
            } else if ((waiting = PyObject_GetAttrString(msg, "waiting")) == NULL) {
                goto done;
            }
            int r = (waiting != NULL && waiting != Py_None) ? PySet_Add(waiting, key) : 0;
            Py_XDECREF(waiting);
            if (r < 0)
                goto done;
        }
    }
    rc = 1;
done:
    Py_DECREF(key);
    Py_XDECREF(start);
    Py_XDECREF(info);
    Py_XDECREF(sub);
    return rc;
}

/* Replay._remove: a durable subscription's ack of a stored topic message is its last ack (Subscription.last_ack
 * = (file id, offset, message id) of the message's ADD; MessageDatabase's subscriptionAcks LastAck).  A key
 * without a subscription (removed meanwhile) changes nothing.  0 = done, -1 = error. */
static int set_last_ack(memo_t *m, PyObject *sub, PyObject *mid, PyObject *msg) {
    PyObject *so = PyDict_GetItemWithError(m->subs, sub);
    if (so == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *t;
    if (Py_IS_TYPE(msg, &EntryType)) {
        t = Py_BuildValue("(lnO)", ((entry_t *)msg)->file_id, ((entry_t *)msg)->offset, mid);
    } else {
        PyObject *fid = PyObject_GetAttrString(msg, "file_id");
        PyObject *off = fid != NULL ? PyObject_GetAttrString(msg, "offset") : NULL;
        t = off != NULL ? PyTuple_Pack(3, fid, off, mid) : NULL;
        Py_XDECREF(fid);
        Py_XDECREF(off);
    }
    if (t == NULL)
        return -1;
    static PyObject *name = NULL; /* interned once: the attribute is set on every topic ack */
    if (name == NULL && (name = PyUnicode_InternFromString("last_ack")) == NULL) {
        Py_DECREF(t);
        return -1;
    }
    int r = PyObject_SetAttr(so, name, t);
    Py_DECREF(t);
    return r;
}

/* ---------------------------------------------------------------------------------------------------
 * The replay's rules 1 and 2 (replay.py Replay._add / Replay._remove) for a record without a transaction.
 * Returns 1 = applied, 0 = hand it to Python, -1 = error.
 */
static int apply_fast(ctx_t *c, const fast_t *f, long file_id, Py_ssize_t offset, Py_ssize_t length) {
    if (f->type == TRACE) {
        if (f->text != NULL) { /* the message must be UTF-8 (commands.utf8) */
            PyObject *t = PyUnicode_DecodeUTF8((const char *)f->text, f->text_len, NULL);
            if (t == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                    return -1;
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(t);
        }
        c->counts[TRACE]++;
        return 1;
    }
    if (f->type == PRODUCER_AUDIT) { /* Replay.last_audit */
        c->last_audit = offset;
        c->counts[PRODUCER_AUDIT]++;
        return 1;
    }
    if (f->type == ACK_MESSAGE_FILE_MAP) { /* Replay.last_ack_map and its blob */
        c->last_ack = offset;
        c->ack_blob = f->text;
        c->ack_blob_len = f->text_len;
        c->counts[ACK_MESSAGE_FILE_MAP]++;
        return 1;
    }
    memo_t *m = memo_get(c, f->dest, f->dest_len);
    if (m == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (f->type == SUBSCRIPTION)
        return apply_subscription(c, f, m, file_id, offset);
    PyObject *mid = PyUnicode_DecodeUTF8((const char *)f->mid, f->mid_len, NULL);
    if (mid == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return -1;
        PyErr_Clear();
        return 0; /* Python reports the FormatError */
    }
    PyObject *sub = NULL;
    if (f->sub != NULL) {
        sub = PyUnicode_DecodeUTF8((const char *)f->sub, f->sub_len, NULL);
        if (sub == NULL) {
            Py_DECREF(mid);
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                return -1;
            PyErr_Clear();
            return 0;
        }
    }
    int rc = -1;
    c->counts[f->type]++; /* from here on the record is the fast path's (or an error) */
    if (f->type == ADD_MESSAGE) {
        if (memo_state(c, m, 1, f->dest, f->dest_len) < 0)
            goto done;
        PyObject *waiting = NULL;
        if (m->dtype == 1 || m->dtype == 3) {
            /* Topic: kept only for the durable subscriptions that want it.  Records are applied in
             * journal order, so every existing subscription started before this record (s.start < pos). */
            if (PyDict_GET_SIZE(m->subs) == 0) {
                rc = 1;
                goto done;
            }
            waiting = PySet_New(m->subs);
            if (waiting == NULL)
                goto done;
        }
        PyObject *entry = entry_new(file_id, offset, length, f->priority, waiting);
        if (entry == NULL) {
            Py_XDECREF(waiting);
            goto done;
        }
        int r = PyDict_SetItem(m->messages, mid, entry);
        Py_DECREF(entry);
        if (r < 0)
            goto done;
        rc = 1;
    } else {
        /* REMOVE: getStoredDestination creates the destination when the index has none (replay.py). */
        if (memo_state(c, m, 1, f->dest, f->dest_len) < 0)
            goto done;
        PyObject *msg = m->messages ? PyDict_GetItemWithError(m->messages, mid) : NULL;
        if (msg == NULL) {
            if (PyErr_Occurred())
                goto done;
            c->unknown_removes++; /* its ADD was in a file the broker's GC deleted */
            rc = 1;
            goto done;
        }
        PyObject *waiting;
        if (Py_IS_TYPE(msg, &EntryType)) {
            waiting = ((entry_t *)msg)->waiting ? ((entry_t *)msg)->waiting : Py_None;
            Py_INCREF(waiting);
        } else {
            waiting = PyObject_GetAttrString(msg, "waiting");
            if (waiting == NULL)
                goto done;
        }
        int drop = 1;
        if (sub != NULL && waiting != Py_None && !f->unmatched && set_last_ack(m, sub, mid, msg) < 0) {
            Py_DECREF(waiting);
            goto done;
        }
        if (sub != NULL && waiting != Py_None) {
            if (PySet_Discard(waiting, sub) < 0) {
                Py_DECREF(waiting);
                goto done;
            }
            drop = PySet_GET_SIZE(waiting) == 0;
        }
        Py_DECREF(waiting);
        if (drop && PyDict_DelItem(m->messages, mid) < 0)
            goto done;
        rc = 1;
    }
done:
    Py_DECREF(mid);
    Py_XDECREF(sub);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * kahadb_check_batches(buf) -> verified: the checksum pass on its own, without the GIL, so that it can run
 * in a thread one file ahead of kahadb_scan_file (which then skips the Adler-32 of every batch that ends
 * at or before `verified`).  It follows the good-batch path of the scan below from offset 0 and stops at
 * the first thing that is not a good batch; everything before that offset is a chain of batches whose
 * stored checksum (when non-zero) matched.  Touching the pages here also takes the page faults off the
 * replaying thread.
 */
PyObject *amq_kahadb_check_batches(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*:kahadb_check_batches", &view))
        return NULL;
    const unsigned char *b = view.buf;
    const Py_ssize_t n = view.len;
    Py_ssize_t off = 0;
    Py_BEGIN_ALLOW_THREADS
    while (n - off >= CONTROL_SIZE && memcmp(b + off, CONTROL_HEADER, 16) == 0) {
        int32_t size = be32(b + off + 16);
        int64_t stored = be64(b + off + 20);
        if (size <= 0 || size > MAX_BATCH_SIZE || (long long)off + CONTROL_SIZE + size > (long long)n)
            break;
        if (stored > 0 && (int64_t)adler32(1, b + off + CONTROL_SIZE, (size_t)size) != stored)
            break;
        off += CONTROL_SIZE + size;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(off);
}

/* ---------------------------------------------------------------------------------------------------
 * The scan.
 */
typedef struct {
    long file_id;
    int skipping;
    int have_lu;
    long long lu_file, lu_off;
    long long records, after, first_after, last_offset;
} file_t;

static int record(ctx_t *c, file_t *ft, const unsigned char *b, Py_ssize_t pos, Py_ssize_t length) {
    ft->records++;
    ft->last_offset = pos;
    if (ft->have_lu && (ft->file_id > ft->lu_file || (ft->file_id == ft->lu_file && pos > ft->lu_off))) {
        if (ft->after == 0)
            ft->first_after = pos;
        ft->after++;
    }
    if (!ft->skipping) {
        fast_t f;
        if (parse_fast(b + pos + HEAD, length - HEAD, &f)) {
            int r = apply_fast(c, &f, ft->file_id, pos, length);
            if (r != 0)
                return r < 0 ? -1 : 0;
        }
    }
    PyObject *res = PyObject_CallFunction(c->slow, "nn", pos, length);
    c->gen++;
    if (res == NULL)
        return -1;
    int skip = PyObject_IsTrue(res);
    Py_DECREF(res);
    if (skip < 0)
        return -1;
    ft->skipping = skip;
    return 0;
}

/* The replay reads the start of each record (destination, messageId) and its end (the fields after the
 * message body); when the checksum pass ran on another core neither is in this core's cache.  While batch
 * i is replayed, ask for the end of batch i+1 (its header was asked for one batch earlier, so reading its
 * size here rarely waits) and for the start of batch i+2. */
static inline void prefetch_ahead(const unsigned char *b, Py_ssize_t n, Py_ssize_t next) {
    if (next + CONTROL_SIZE > n)
        return;
    int32_t size = be32(b + next + 16);
    Py_ssize_t after = next + CONTROL_SIZE + (Py_ssize_t)size;
    if (size <= 0 || after > n)
        return;
    __builtin_prefetch(b + after - 1);
    if (after + 128 <= n) {
        __builtin_prefetch(b + after);
        __builtin_prefetch(b + after + 64);
        __builtin_prefetch(b + after + 127);
    }
}

static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL)
        return -1;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

static PyObject *opt_ll(int present, long long v) {
    if (!present)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(v);
}

PyObject *amq_kahadb_scan_file(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"buf", "file_id", "checksums", "last_update", "hooks", "verified", NULL};
    Py_buffer view;
    long file_id;
    int checksums;
    PyObject *last_update, *hooks;
    long long verified = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*lpOO|L:kahadb_scan_file", kwlist, &view, &file_id, &checksums,
                                     &last_update, &hooks, &verified))
        return NULL;
    const unsigned char *b = view.buf;
    const Py_ssize_t n = view.len;
    PyObject *corrupt = PyList_New(0), *bad = PyList_New(0), *end = NULL, *result = NULL;
    ctx_t *c = PyMem_Calloc(1, sizeof(ctx_t));
    file_t ft = {.file_id = file_id, .first_after = -1, .last_offset = -1};
    if (c == NULL || corrupt == NULL || bad == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    if (!PyArg_ParseTuple(hooks, "O!OOOO:hooks", &PyDict_Type, &c->destinations, &c->resolve, &c->ensure, &c->slow,
                          &c->subscription_cls))
        goto out;
    c->last_audit = c->last_ack = -1;
    if (!(EntryType.tp_flags & Py_TPFLAGS_READY)) {
        if (PyType_Ready(&EntryType) < 0)
            goto out;
    }
    if (last_update != Py_None) {
        if (!PyArg_ParseTuple(last_update, "LL:last_update", &ft.lu_file, &ft.lu_off))
            goto out;
        ft.have_lu = 1;
    }
    long long batches = 0, data_bytes = 0;
    Py_ssize_t off = 0;
    for (;;) {
        if (off >= n) {
            end = Py_BuildValue("(ns)", off, "end-of-file");
            break;
        }
        Py_ssize_t avail = n - off;
        if (avail >= 5 && memcmp(b + off, EOF_RECORD, 5) == 0) {
            end = Py_BuildValue("(ns)", off, "eof-marker");
            break;
        }
        const char *reason = NULL;
        int has_stored = 0, has_computed = 0;
        int64_t stored = 0;
        uint32_t computed = 0;
        int32_t size = 0;
        if (avail < CONTROL_SIZE) {
            /* Python compares buf[off:n] with the 16-byte header's first n-off bytes: only a tail of at
             * most 16 bytes that is a prefix of the header counts as a truncated batch. */
            reason = (avail <= 16 && memcmp(b + off, CONTROL_HEADER, (size_t)avail) == 0) ? "truncated" : "bad-header";
        } else if (memcmp(b + off, CONTROL_HEADER, 16) != 0) {
            reason = "bad-header";
        } else {
            size = be32(b + off + 16);
            stored = be64(b + off + 20);
            has_stored = 1;
            if (size < 0 || size > MAX_BATCH_SIZE) {
                reason = "bad-size";
            } else if ((long long)off + CONTROL_SIZE + size > (long long)n) {
                reason = "truncated";
            } else if (checksums && stored > 0) {
                if ((long long)off + CONTROL_SIZE + size <= verified) {
                    computed = (uint32_t)stored; /* kahadb_check_batches matched it already */
                } else {
                    computed = adler32(1, b + off + CONTROL_SIZE, (size_t)size);
                    if ((int64_t)computed != stored)
                        reason = "checksum";
                }
                has_computed = 1;
            }
        }
        if (reason == NULL) {
            if (size == 0) {
                end = Py_BuildValue("(ns)", off, "zero-batch");
                break;
            }
            batches++;
            data_bytes += (long long)size + CONTROL_SIZE;
            prefetch_ahead(b, n, off + CONTROL_SIZE + size);
            /* The user records must tile the batch (journal.iter_batch_records). */
            Py_ssize_t pos = off + CONTROL_SIZE, bend = off + CONTROL_SIZE + size;
            while (pos < bend) {
                int code = 0;
                long long value = 0;
                int32_t length = 0;
                if (pos + HEAD > bend) {
                    code = 1;
                    value = bend - pos;
                } else {
                    length = be32(b + pos);
                    if (b[pos + 4] != 1) {
                        code = 2;
                        value = b[pos + 4];
                    } else if (length < HEAD || (long long)pos + length > (long long)bend) {
                        code = 3;
                        value = length;
                    }
                }
                if (code) {
                    if (append_new(bad, Py_BuildValue("(innnL)", code, pos, off, bend, value)) < 0)
                        goto out;
                    break;
                }
                if (record(c, &ft, b, pos, length) < 0)
                    goto out;
                pos += length;
            }
            off += CONTROL_SIZE + size;
            continue;
        }
        PyObject *st = opt_ll(has_stored, stored), *cp = opt_ll(has_computed, computed);
        if (st == NULL || cp == NULL) {
            Py_XDECREF(st);
            Py_XDECREF(cp);
            goto out;
        }
        if (strcmp(reason, "bad-header") == 0 && avail >= 5 && memcmp(b + off, ZERO_HEADER, 5) == 0) {
            /* A zero header ends the data unless a later batch follows (then it is a corrupted range). */
            Py_DECREF(st);
            Py_DECREF(cp);
            Py_ssize_t nxt = find_header(b, n, off + 1);
            if (nxt < 0) {
                end = Py_BuildValue("(ns)", off, "zeros");
                break;
            }
            if (append_new(corrupt, Py_BuildValue("(nnsOOO)", off, nxt - 1, reason, Py_False, Py_None, Py_None)) < 0)
                goto out;
            off = nxt;
            continue;
        }
        Py_ssize_t nxt = find_header(b, n, off + 1);
        if (nxt < 0) {
            Py_ssize_t last = n - 1 > off ? n - 1 : off;
            int r = append_new(corrupt, Py_BuildValue("(nnsONN)", off, last, reason, Py_True, st, cp));
            if (r < 0)
                goto out;
            end = Py_BuildValue("(ns)", off, "corrupt-tail");
            break;
        }
        if (append_new(corrupt, Py_BuildValue("(nnsONN)", off, nxt - 1, reason, Py_False, st, cp)) < 0)
            goto out;
        off = nxt;
    }
    if (end == NULL)
        goto out;
    PyObject *counts = PyTuple_New(ENTRY_TYPES);
    if (counts == NULL)
        goto out;
    for (int i = 0; i < ENTRY_TYPES; i++) {
        PyObject *v = PyLong_FromLongLong(c->counts[i]);
        if (v == NULL) {
            Py_DECREF(counts);
            goto out;
        }
        PyTuple_SET_ITEM(counts, i, v);
    }
    PyObject *blob = c->last_ack < 0 ? Py_None : c->ack_blob == NULL
                   ? PyBytes_FromStringAndSize("", 0) : PyBytes_FromStringAndSize((const char *)c->ack_blob, c->ack_blob_len);
    if (blob == NULL) {
        Py_DECREF(counts);
        goto out;
    }
    if (blob == Py_None)
        Py_INCREF(blob);
    result = Py_BuildValue("(LLLOOONLLLLnnN)", batches, data_bytes, ft.records, corrupt, bad, end, counts, ft.after,
                           ft.first_after, ft.last_offset, c->unknown_removes, c->last_audit, c->last_ack, blob);
out:
    if (c != NULL) {
        for (int i = 0; i < MEMO; i++)
            memo_clear_entry(&c->memo[i]);
        PyMem_Free(c);
    }
    Py_XDECREF(corrupt);
    Py_XDECREF(bad);
    Py_XDECREF(end);
    PyBuffer_Release(&view);
    return result;
}
