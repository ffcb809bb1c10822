/* create --from's per-message chain in C: a stored OpenWire message (loose encoding, size prefix, OpenWire
 * 10+) -> the core message OpenWireMessageConverter.inbound + AMQSession.send make of it -> the
 * ADD_MESSAGE_PROTOCOL (45) record body CoreMessagePersister writes.
 *
 * The Python functions are the reference: amqtool.formats.kahadb.openwire.decode_message,
 * amqtool.engines.migrate.convert.convert, amqtool.engines.migrate.write.message_record (CoreMessage.encode).
 * This file covers the messages stores hold nearly always and leaves every other one to them (None for
 * that item): compressed bodies, map and stream bodies, BLOB messages, brokerPath/cluster arrays, a
 * dataStructure, nested map/list properties, NaN float properties, a property name put twice, unpaired
 * surrogates in any text, anything that does not decode (Python then says why), and a message that becomes a
 * large message (its body above the threshold, or its record too large for a journal file).
 * tests/native/test_migrate_native.py holds the two identical on every fixture and generated store. */
#include "core_codec.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---- Java modified UTF-8 -> UTF-16LE, as openwire.decode_modified_utf8 + str.encode("utf-16-le") ----
 * C0 80 is U+0000; standard 1-4 byte UTF-8 as Python's strict decoder accepts it (no overlongs, nothing
 * above U+10FFFF); a 4-byte sequence becomes a surrogate pair. A surrogate spelled out in 3 bytes (which
 * Python's surrogatepass would take, then pair or replace) and anything invalid return -1: the message is
 * left to Python. o must have room for 2 * n bytes. */
static int mutf8_to_utf16le(const unsigned char *s, Py_ssize_t n, unsigned char *o, Py_ssize_t *outn) {
    Py_ssize_t i = 0, k = 0;
    while (i < n) {
#ifdef __SSE2__
        /* runs of ASCII, 16 bytes at a time: each byte becomes a unit (byte, 0) */
        while (i + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            if (_mm_movemask_epi8(v))
                break;
            __m128i z = _mm_setzero_si128();
            _mm_storeu_si128((__m128i *)(o + k), _mm_unpacklo_epi8(v, z));
            _mm_storeu_si128((__m128i *)(o + k + 16), _mm_unpackhi_epi8(v, z));
            i += 16;
            k += 32;
        }
        if (i >= n)
            break;
#endif
        unsigned c = s[i];
        if (c < 0x80) {
            o[k++] = (unsigned char)c;
            o[k++] = 0;
            i++;
            continue;
        }
        unsigned u;
        if (c == 0xC0) {
            if (i + 1 >= n || s[i + 1] != 0x80)
                return -1;
            u = 0;
            i += 2;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return -1;
            u = (c & 0x1F) << 6 | (s[i + 1] & 0x3F);
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n)
                return -1;
            unsigned b1 = s[i + 1], b2 = s[i + 2];
            unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF; /* ED A0..BF: a surrogate */
            if (b1 < lo || b1 > hi || (b2 & 0xC0) != 0x80)
                return -1;
            u = (c & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F);
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n)
                return -1;
            unsigned b1 = s[i + 1], b2 = s[i + 2], b3 = s[i + 3];
            unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
            if (b1 < lo || b1 > hi || (b2 & 0xC0) != 0x80 || (b3 & 0xC0) != 0x80)
                return -1;
            unsigned cp = (c & 0x07) << 18 | (b1 & 0x3F) << 12 | (b2 & 0x3F) << 6 | (b3 & 0x3F);
            cp -= 0x10000;
            unsigned hs = 0xD800 | (cp >> 10), ls = 0xDC00 | (cp & 0x3FF);
            o[k++] = (unsigned char)(hs & 0xFF);
            o[k++] = (unsigned char)(hs >> 8);
            o[k++] = (unsigned char)(ls & 0xFF);
            o[k++] = (unsigned char)(ls >> 8);
            i += 4;
            continue;
        } else {
            return -1;
        }
        o[k++] = (unsigned char)(u & 0xFF);
        o[k++] = (unsigned char)(u >> 8);
    }
    *outn = k;
    return 0;
}

/* ---- the OpenWire reader: r->bad on any overrun, fb (fallback) on anything this file leaves to Python ---- */

typedef struct {
    rd r;
    int fb;
    unsigned char *scratch; /* room for the UTF-16 of any string of the message (2 * its length) */
} ow;

static inline int ow_ok(ow *w) { return !w->r.bad && !w->fb; }

/* looseUnmarshalString: bool present, u16 length, modified UTF-8. *s/*n the UTF-8 bytes (NULL when absent);
 * validated here (an invalid one is Python's FormatError: fallback). */
static int ow_string(ow *w, const unsigned char **s, Py_ssize_t *n) {
    *s = NULL;
    *n = 0;
    if (!r_u8(&w->r))
        return 0;
    int len = r_u16(&w->r);
    if (!need(&w->r, len))
        return 0;
    *s = w->r.p + w->r.pos;
    *n = len;
    w->r.pos += len;
    Py_ssize_t on;
    if (mutf8_to_utf16le(*s, len, w->scratch, &on) < 0)
        w->fb = 1;
    return 1;
}

static void ow_skip_string(ow *w) {
    const unsigned char *s;
    Py_ssize_t n;
    ow_string(w, &s, &n);
}

/* looseUnmarshalByteArray: bool present, i32 length (negative: FormatError), bytes. Returns 1 when present. */
static int ow_byte_array(ow *w, const unsigned char **s, Py_ssize_t *n) {
    *s = NULL;
    *n = 0;
    if (!r_u8(&w->r))
        return 0;
    int32_t len = r_i32(&w->r);
    if (w->r.bad)
        return 0;
    if (len < 0 || !need(&w->r, len)) {
        w->r.bad = 1;
        return 0;
    }
    *s = w->r.p + w->r.pos;
    *n = len;
    w->r.pos += len;
    return 1;
}

/* openwire._nested: bool present, type byte, the loose body of the types it knows (anything else is its
 * FormatError). Returns the position of the type byte (-1 when absent): the object's stored loose encoding
 * runs from there to r.pos. */
static Py_ssize_t ow_nested(ow *w, int depth) {
    if (!r_u8(&w->r))
        return -1;
    if (depth > 8) {
        w->r.bad = 1;
        return -1;
    }
    Py_ssize_t start = w->r.pos;
    int t = r_u8(&w->r);
    if (w->r.bad)
        return -1;
    switch (t) {
    case 100: case 101: case 102: case 103: /* destinations */
    case 120: case 124:                     /* ConnectionId, BrokerId */
        ow_skip_string(w);
        break;
    case 123: /* ProducerId: connectionId, value, sessionId */
    case 122: /* ConsumerId */
        ow_skip_string(w);
        r_i64(&w->r);
        r_i64(&w->r);
        break;
    case 121: /* SessionId */
        ow_skip_string(w);
        r_i64(&w->r);
        break;
    case 110: /* MessageId (OpenWire 10+): textView, producerId, producerSequenceId, brokerSequenceId */
        ow_skip_string(w);
        ow_nested(w, depth + 1);
        r_i64(&w->r);
        r_i64(&w->r);
        break;
    case 111: /* LocalTransactionId: value, connectionId */
        r_i64(&w->r);
        ow_nested(w, depth + 1);
        break;
    case 112: { /* XATransactionId: formatId, globalTransactionId, branchQualifier */
        const unsigned char *s;
        Py_ssize_t n;
        r_i32(&w->r);
        ow_byte_array(w, &s, &n);
        ow_byte_array(w, &s, &n);
        break;
    }
    default:
        w->r.bad = 1;
        return -1;
    }
    return start;
}

/* ---- the core message's properties ---- */

typedef struct {
    Py_ssize_t off, len;   /* the encoded entry (SimpleString key, type, value) in the property buffer */
    Py_ssize_t klen;       /* UTF-16LE bytes of the key, at off + 4 */
    uint32_t shash, jhash; /* SimpleString.hashCode, String.hashCode of the key */
} cprop;

typedef struct {
    outbuf pb; /* encoded entries */
    cprop *v;
    Py_ssize_t n, cap;
    int nomem;
} plist;

static uint32_t java_hash16(const unsigned char *s, Py_ssize_t n) {
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i + 1 < n; i += 2)
        h = 31 * h + (uint32_t)(s[i] | s[i + 1] << 8);
    return h;
}

static inline uint32_t spread(uint32_t h) { return h ^ (h >> 16); }

static cprop *pl_new(plist *pl) {
    if (pl->n == pl->cap) {
        Py_ssize_t cap = pl->cap ? pl->cap * 2 : 32;
        cprop *v = PyMem_RawRealloc(pl->v, (size_t)cap * sizeof(cprop));
        if (v == NULL) {
            pl->nomem = 1;
            return NULL;
        }
        pl->v = v;
        pl->cap = cap;
    }
    return &pl->v[pl->n++];
}

static inline void pb_u8(outbuf *o, unsigned v) { o->p[o->n++] = (char)v; }
static inline void pb_be(outbuf *o, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--)
        o->p[o->n++] = (char)(v >> (8 * i));
}

/* Start an entry whose key is the UTF-16LE k/kn: i32 length, key, type. Room for extra value bytes. */
static cprop *pl_start(plist *pl, const unsigned char *k, Py_ssize_t kn, int type, size_t extra) {
    if (pl->nomem || ob_reserve(&pl->pb, (size_t)kn + 5 + extra) < 0) {
        pl->nomem = 1;
        return NULL;
    }
    cprop *c = pl_new(pl);
    if (c == NULL)
        return NULL;
    c->off = (Py_ssize_t)pl->pb.n;
    c->klen = kn;
    pb_be(&pl->pb, (uint32_t)kn, 4);
    ob_put(&pl->pb, (const char *)k, (size_t)kn);
    pb_u8(&pl->pb, (unsigned)type);
    c->shash = ss_hash(k, kn);
    c->jhash = java_hash16(k, kn);
    return c;
}

static inline void pl_end(plist *pl, cprop *c) { c->len = (Py_ssize_t)pl->pb.n - c->off; }

/* An ASCII key (the converter's own names). */
static cprop *pl_start_ascii(plist *pl, const char *name, int type, size_t extra) {
    unsigned char k[64];
    Py_ssize_t n = (Py_ssize_t)strlen(name);
    for (Py_ssize_t i = 0; i < n; i++) {
        k[2 * i] = (unsigned char)name[i];
        k[2 * i + 1] = 0;
    }
    return pl_start(pl, k, 2 * n, type, extra);
}

static void pl_long(plist *pl, const char *name, int64_t v) {
    cprop *c = pl_start_ascii(pl, name, 7, 8);
    if (c) {
        pb_be(&pl->pb, (uint64_t)v, 8);
        pl_end(pl, c);
    }
}
static void pl_int(plist *pl, const char *name, int32_t v) {
    cprop *c = pl_start_ascii(pl, name, 6, 4);
    if (c) {
        pb_be(&pl->pb, (uint32_t)v, 4);
        pl_end(pl, c);
    }
}
static void pl_bool(plist *pl, const char *name, int v) {
    cprop *c = pl_start_ascii(pl, name, 2, 1);
    if (c) {
        pb_u8(&pl->pb, v ? 1 : 0);
        pl_end(pl, c);
    }
}
static void pl_byte(plist *pl, const char *name, int v) {
    cprop *c = pl_start_ascii(pl, name, 3, 1);
    if (c) {
        pb_u8(&pl->pb, (unsigned)v & 0xFF);
        pl_end(pl, c);
    }
}
/* BYTES: i32 length + the bytes, with an optional i32 prefix of its own (convert.marshalled). */
static void pl_bytes(plist *pl, const char *name, const unsigned char *b, Py_ssize_t n, int size_prefix) {
    Py_ssize_t total = n + (size_prefix ? 4 : 0);
    cprop *c = pl_start_ascii(pl, name, 4, (size_t)total + 4);
    if (c) {
        pb_be(&pl->pb, (uint32_t)total, 4);
        if (size_prefix)
            pb_be(&pl->pb, (uint32_t)n, 4);
        ob_put(&pl->pb, (const char *)b, (size_t)n);
        pl_end(pl, c);
    }
}
/* STRING from modified UTF-8 (already validated by ow_string). */
static void pl_string(plist *pl, const char *name, const unsigned char *s, Py_ssize_t n) {
    cprop *c = pl_start_ascii(pl, name, 10, (size_t)n * 2 + 4);
    if (c) {
        Py_ssize_t on = 0;
        unsigned char *lenp = (unsigned char *)pl->pb.p + pl->pb.n;
        mutf8_to_utf16le(s, n, lenp + 4, &on);
        for (int i = 0; i < 4; i++)
            lenp[i] = (unsigned char)((uint32_t)on >> (24 - 8 * i));
        pl->pb.n += (size_t)on + 4;
        pl_end(pl, c);
    }
}

/* Order idx[0..n) by (spread(hash) & mask, position): a HashMap's iteration order (primitives.hashmap_order). */
static void hashmap_sort(int *idx, const uint32_t *h, Py_ssize_t n, uint32_t mask) {
    for (Py_ssize_t i = 0; i < n; i++)
        idx[i] = (int)i;
    for (Py_ssize_t i = 1; i < n; i++) {
        int x = idx[i];
        uint32_t bx = spread(h[x]) & mask;
        Py_ssize_t j = i - 1;
        while (j >= 0 && (spread(h[idx[j]]) & mask) > bx) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = x;
    }
}

static int same_key(const plist *pl, const cprop *a, const cprop *b) {
    return a->klen == b->klen && memcmp(pl->pb.p + a->off + 4, pl->pb.p + b->off + 4, (size_t)a->klen) == 0;
}

/* convert.user_properties: the marshalled primitive map's entries as core properties, in the HashMap order
 * of MarshallingSupport.unmarshalPrimitiveMap. Appended to pl. */
static void user_props(ow *w, plist *pl, const unsigned char *raw, Py_ssize_t rawn) {
    if (rawn == 0)
        return;
    ow m = {{raw, 0, rawn, 0}, 0, w->scratch};
    int32_t n = r_i32(&m.r);
    if (m.r.bad) {
        w->fb = 1;
        return;
    }
    if (n == -1)
        return;
    if (n < 0 || n > rawn - m.r.pos) {
        w->fb = 1;
        return;
    }
    Py_ssize_t first = pl->n;
    for (int32_t e = 0; e < n && ow_ok(&m) && !pl->nomem; e++) {
        int klen = r_u16(&m.r);
        if (!need(&m.r, klen))
            break;
        const unsigned char *kb = m.r.p + m.r.pos;
        m.r.pos += klen;
        Py_ssize_t kn;
        if (mutf8_to_utf16le(kb, klen, m.scratch, &kn) < 0) {
            m.fb = 1;
            break;
        }
        /* the key's UTF-16 sits in scratch: copy it before the value's text reuses scratch */
        int t = r_u8(&m.r);
        if (m.r.bad)
            break;
        const unsigned char *vs = NULL;
        Py_ssize_t vn = 0;
        int pt;
        size_t extra = 0;
        switch (t) {
        case 0: pt = 0; break;              /* null */
        case 1: pt = 2; extra = 1; break;   /* boolean */
        case 2: pt = 3; extra = 1; break;   /* byte */
        case 3: pt = 11; extra = 2; break;  /* char */
        case 4: pt = 5; extra = 2; break;   /* short */
        case 5: pt = 6; extra = 4; break;   /* int */
        case 6: pt = 7; extra = 8; break;   /* long */
        case 7: pt = 9; extra = 8; break;   /* double */
        case 8: pt = 8; extra = 4; break;   /* float */
        case 9:                             /* string: u16 length */
            vn = r_u16(&m.r);
            pt = 10;
            break;
        case 10: /* bytes: i32 length */
        case 13: /* big string: i32 length */
            vn = r_i32(&m.r);
            pt = t == 10 ? 4 : 10;
            if (vn < 0)
                m.r.bad = 1;
            break;
        default: /* 11 map, 12 list (the toString fallback), unknown types: Python */
            m.fb = 1;
            pt = -1;
        }
        if (!ow_ok(&m))
            break;
        if (pt == 4 || pt == 10) {
            if (!need(&m.r, vn))
                break;
            vs = m.r.p + m.r.pos;
            m.r.pos += vn;
            extra = (size_t)(pt == 10 ? 2 * vn : vn) + 4;
        } else if (extra) {
            if (!need(&m.r, (Py_ssize_t)extra))
                break;
            vs = m.r.p + m.r.pos;
            m.r.pos += (Py_ssize_t)extra;
        }
        /* the key's UTF-16 is still in scratch (the value's text is converted into the entry directly) */
        cprop *c = pl_start(pl, m.scratch, kn, pt, extra);
        if (c == NULL)
            break;
        const unsigned char *v = vs;
        outbuf *o = &pl->pb;
        switch (pt) {
        case 0:
            break;
        case 2:
            pb_u8(o, v[0] ? 1 : 0);
            break;
        case 8: {
            uint32_t bits = (uint32_t)be32(v);
            if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu)) /* NaN: Python keeps what struct does */
                m.fb = 1;
            ob_put(o, (const char *)v, 4);
            break;
        }
        case 9: {
            uint64_t bits = (uint64_t)be64(v);
            if ((bits & 0x7FF0000000000000ull) == 0x7FF0000000000000ull && (bits & 0xFFFFFFFFFFFFFull))
                m.fb = 1;
            ob_put(o, (const char *)v, 8);
            break;
        }
        case 4:
            pb_be(o, (uint32_t)vn, 4);
            ob_put(o, (const char *)vs, (size_t)vn);
            break;
        case 10: {
            Py_ssize_t on;
            unsigned char *lenp = (unsigned char *)o->p + o->n;
            if (mutf8_to_utf16le(vs, vn, lenp + 4, &on) < 0) {
                m.fb = 1;
                break;
            }
            for (int i = 0; i < 4; i++)
                lenp[i] = (unsigned char)((uint32_t)on >> (24 - 8 * i));
            o->n += (size_t)on + 4;
            break;
        }
        default: /* byte, char, short, int, long: the stored big-endian bytes */
            ob_put(o, (const char *)v, extra);
        }
        pl_end(pl, c);
    }
    if (pl->nomem) {
        w->fb = 1; /* the caller raises MemoryError from pl->nomem */
        return;
    }
    if (!ow_ok(&m) || m.r.pos != m.r.end) {
        w->fb = 1;
        return;
    }
    Py_ssize_t cnt = pl->n - first;
    for (Py_ssize_t a = first; a < pl->n; a++) /* a repeated key: Python's dict semantics */
        for (Py_ssize_t b = first; b < a; b++)
            if (pl->v[a].jhash == pl->v[b].jhash && same_key(pl, &pl->v[a], &pl->v[b])) {
                w->fb = 1;
                return;
            }
    /* convert.java_map_order: new HashMap<>(min(128, n)) grown past 0.75 */
    Py_ssize_t want = cnt < 128 ? cnt : 128;
    uint32_t cap = 1;
    while ((Py_ssize_t)cap < want)
        cap *= 2;
    while (cnt > (Py_ssize_t)(cap * 3 / 4))
        cap *= 2;
    uint32_t *h = PyMem_RawMalloc(sizeof(uint32_t) * (size_t)cnt + 1);
    int *idx = PyMem_RawMalloc(sizeof(int) * (size_t)cnt + 1);
    cprop *tmp = PyMem_RawMalloc(sizeof(cprop) * (size_t)cnt + 1);
    if (!h || !idx || !tmp) {
        pl->nomem = 1;
        w->fb = 1;
    } else {
        for (Py_ssize_t i = 0; i < cnt; i++)
            h[i] = pl->v[first + i].jhash;
        hashmap_sort(idx, h, cnt, cap - 1);
        for (Py_ssize_t i = 0; i < cnt; i++)
            tmp[i] = pl->v[first + idx[i]];
        memcpy(&pl->v[first], tmp, sizeof(cprop) * (size_t)cnt);
    }
    PyMem_RawFree(h);
    PyMem_RawFree(idx);
    PyMem_RawFree(tmp);
}

/* ---- one message ---- */

typedef struct {
    const unsigned char *addr; /* the address as UTF-16LE, or NULL */
    Py_ssize_t addr_n;
    int routing_type;
    Py_ssize_t threshold, max_record;
} conv_args;

static inline void o_be(outbuf *o, uint64_t v, int bytes) { pb_be(o, v, bytes); }

/* Returns 1 and the record in *out (out->n bytes), or 0 for Python's path; *body_len, *redelivery. Sets
 * *nomem on an allocation failure. */
static int convert_one(const unsigned char *buf, Py_ssize_t len, int64_t mid, const conv_args *a, plist *pl,
                       outbuf *out, unsigned char **scratch, size_t *scratch_cap, Py_ssize_t *body_len,
                       int32_t *redelivery, int *nomem) {
    size_t half = (size_t)len * 2 + 16; /* strings (and keys) in the first half, the text body in the second */
    if (2 * half > *scratch_cap) {
        size_t cap = 2 * half;
        unsigned char *s = PyMem_RawRealloc(*scratch, cap);
        if (s == NULL) {
            *nomem = 1;
            return 0;
        }
        *scratch = s;
        *scratch_cap = cap;
    }
    ow w = {{buf, 0, len, 0}, 0, *scratch};
    rd *r = &w.r;
    int32_t size = r_i32(r);
    if (r->bad || size != len - 4)
        return 0;
    int t = r_u8(r);
    static const int core_types[] = {0, 4, -1, 2, -1, 3}; /* 23..28; map and stream bodies: Python */
    if (t < 23 || t > 28 || core_types[t - 23] < 0)
        return 0;
    int core_type = core_types[t - 23];
    int32_t command_id = r_i32(r);
    r_u8(r); /* responseRequired */
    Py_ssize_t prod = ow_nested(&w, 0), prod_end = r->pos;
    ow_nested(&w, 0); /* destination */
    ow_nested(&w, 0); /* transactionId */
    Py_ssize_t odest = ow_nested(&w, 0), odest_end = r->pos;
    Py_ssize_t msgid = ow_nested(&w, 0), msgid_end = r->pos;
    ow_nested(&w, 0); /* originalTransactionId */
    const unsigned char *group, *corr, *jms_type, *user_id, *content, *mprops;
    Py_ssize_t group_n, corr_n, jms_type_n, user_id_n, content_n, mprops_n;
    int has_group = ow_string(&w, &group, &group_n);
    int32_t group_seq = r_i32(r);
    int has_corr = ow_string(&w, &corr, &corr_n);
    int persistent = r_u8(r);
    int64_t expiration = r_i64(r);
    int priority = r_u8(r);
    Py_ssize_t reply = ow_nested(&w, 0), reply_end = r->pos;
    int64_t timestamp = r_i64(r);
    int has_type = ow_string(&w, &jms_type, &jms_type_n);
    int has_content = ow_byte_array(&w, &content, &content_n);
    int has_props = ow_byte_array(&w, &mprops, &mprops_n);
    if (!ow_ok(&w))
        return 0;
    if (r_u8(r)) /* dataStructure: Python */
        return 0;
    ow_nested(&w, 0); /* targetConsumerId */
    if (r_u8(r))      /* compressed: Python */
        return 0;
    *redelivery = r_i32(r);
    if (r_u8(r)) /* brokerPath: Python */
        return 0;
    int64_t arrival = r_i64(r);
    int has_user = ow_string(&w, &user_id, &user_id_n);
    r_u8(r); /* recievedByDFBridge */
    int droppable = r_u8(r);
    if (r_u8(r)) /* cluster: Python */
        return 0;
    int64_t broker_in = r_i64(r);
    r_i64(r); /* brokerOutTime */
    r_u8(r);  /* jmsxGroupFirstForConsumer (OpenWire 10+) */
    if (!ow_ok(&w) || r->pos != r->end)
        return 0;

    /* the body (convert.core_body) */
    const unsigned char *body = NULL, *text = NULL;
    Py_ssize_t text_n = 0;
    int text_null = 0;
    Py_ssize_t blen;
    if (core_type == 3) {
        if (!has_content) {
            text_null = 1;
        } else {
            rd tr = {content, 0, content_n, 0};
            int32_t n = r_i32(&tr);
            if (tr.bad)
                return 0;
            if (n == -1) {
                text_null = 1;
            } else {
                if (!need(&tr, n) || tr.pos + n != tr.end)
                    return 0;
                text = content + 4;
                text_n = n;
            }
        }
        if (text_null) {
            blen = 1;
        } else {
            Py_ssize_t on;
            if (mutf8_to_utf16le(text, text_n, w.scratch + half, &on) < 0)
                return 0;
            blen = 5 + on;
            body = w.scratch + half; /* the UTF-16, written after the 5-byte prefix below */
        }
    } else if (core_type == 2) {
        blen = has_content ? 4 + content_n : 0;
    } else {
        blen = has_content ? content_n : 0;
    }
    if (blen > a->threshold)
        return 0; /* a large message: Python writes it (message_record) */
    *body_len = blen;

    /* the properties, in convert()'s order */
    pl->n = 0;
    pl->pb.n = 0;
    pl->nomem = pl->pb.nomem = 0;
    if (has_type)
        pl_string(pl, "JMSType", jms_type, jms_type_n);
    pl_long(pl, "__HDR_ARRIVAL", arrival);
    pl_long(pl, "__HDR_BROKER_IN_TIME", broker_in);
    pl_int(pl, "__HDR_COMMAND_ID", command_id);
    if (has_corr)
        pl_string(pl, "JMSCorrelationID", corr, corr_n);
    if (has_group)
        pl_string(pl, "_AMQ_GROUP_ID", group, group_n);
    pl_int(pl, "__HDR_GROUP_SEQUENCE", group_seq);
    if (msgid >= 0) {
        pl_bytes(pl, "__HDR_MESSAGE_ID", buf + msgid, msgid_end - msgid, 1);
    } else {
        static const unsigned char null_obj[] = {0};
        pl_bytes(pl, "__HDR_MESSAGE_ID", null_obj, 1, 1);
    }
    if (prod >= 0)
        pl_bytes(pl, "__HDR_PRODUCER_ID", buf + prod, prod_end - prod, 1);
    if (has_props) {
        pl_bytes(pl, "__HDR_MARSHALL_PROP", mprops, mprops_n, 0);
        user_props(&w, pl, mprops, mprops_n);
        if (w.fb || pl->nomem) {
            if (pl->nomem || pl->pb.nomem)
                *nomem = 1;
            return 0;
        }
    }
    if (reply >= 0)
        pl_bytes(pl, "__HDR_REPLY_TO", buf + reply, reply_end - reply, 1);
    if (has_user)
        pl_string(pl, "__HDR_USER_ID", user_id, user_id_n);
    pl_bool(pl, "__HDR_DROPPABLE", droppable);
    if (odest >= 0)
        pl_bytes(pl, "__HDR_ORIG_DESTINATION", buf + odest, odest_end - odest, 1);
    pl_byte(pl, "_AMQ_ROUTING_TYPE", a->routing_type);
    if (pl->nomem || pl->pb.nomem) {
        *nomem = 1;
        return 0;
    }
    Py_ssize_t np = pl->n;
    /* a user property named like one of the converter's: Python (TypedProperties.of merges them) */
    for (Py_ssize_t i = 0; i < np; i++)
        for (Py_ssize_t j = 0; j < i; j++)
            if (pl->v[i].shash == pl->v[j].shash && same_key(pl, &pl->v[i], &pl->v[j]))
                return 0;
    /* TypedProperties.of: a default HashMap (16, doubled past 0.75) */
    uint32_t cap = 16;
    while (np > (Py_ssize_t)(cap * 3 / 4))
        cap *= 2;
    uint32_t hs_local[64];
    int idx_local[64];
    uint32_t *hs = np <= 64 ? hs_local : PyMem_RawMalloc(sizeof(uint32_t) * (size_t)np);
    int *idx = np <= 64 ? idx_local : PyMem_RawMalloc(sizeof(int) * (size_t)np);
    if (hs == NULL || idx == NULL) {
        if (hs != hs_local)
            PyMem_RawFree(hs);
        if (idx != idx_local)
            PyMem_RawFree(idx);
        *nomem = 1;
        return 0;
    }
    for (Py_ssize_t i = 0; i < np; i++)
        hs[i] = pl->v[i].shash;
    hashmap_sort(idx, hs, np, cap - 1);

    /* the record: persister, id, address, i32 buffer length, the buffer (CoreMessage.encode) */
    Py_ssize_t addr_len = a->addr ? 5 + a->addr_n : 1;
    size_t total = 1 + 8 + (size_t)addr_len + 4 + 4 + (size_t)blen + 8 + (size_t)addr_len + 1 + 1 + 1 + 8 + 8 + 1 +
                   1 + 4 + pl->pb.n;
    int fits = (Py_ssize_t)total + 64 <= a->max_record; /* else a large message (Python) */
    out->n = 0;
    if (fits && ob_reserve(out, total) < 0)
        *nomem = 1;
    if (!fits || *nomem) {
        if (hs != hs_local)
            PyMem_RawFree(hs);
        if (idx != idx_local)
            PyMem_RawFree(idx);
        return 0;
    }
    o_be(out, 1, 1); /* CORE_PERSISTER */
    o_be(out, (uint64_t)mid, 8);
    if (a->addr) {
        o_be(out, 1, 1);
        o_be(out, (uint32_t)a->addr_n, 4);
        ob_put(out, (const char *)a->addr, (size_t)a->addr_n);
    } else {
        o_be(out, 0, 1);
    }
    o_be(out, (uint32_t)(total - (size_t)(1 + 8 + addr_len + 4)), 4);
    o_be(out, (uint32_t)(blen + 13), 4); /* endOfBodyPosition */
    if (core_type == 3) {
        if (text_null) {
            o_be(out, 0, 1);
        } else {
            o_be(out, 1, 1);
            o_be(out, (uint32_t)(blen - 5), 4);
            ob_put(out, (const char *)body, (size_t)(blen - 5));
        }
    } else if (core_type == 2) {
        if (has_content) {
            o_be(out, (uint32_t)content_n, 4);
            ob_put(out, (const char *)content, (size_t)content_n);
        }
    } else if (has_content) {
        ob_put(out, (const char *)content, (size_t)content_n);
    }
    o_be(out, (uint64_t)mid, 8);
    if (a->addr) {
        o_be(out, 1, 1);
        o_be(out, (uint32_t)a->addr_n, 4);
        ob_put(out, (const char *)a->addr, (size_t)a->addr_n);
    } else {
        o_be(out, 0, 1);
    }
    o_be(out, 0, 1); /* no userID */
    o_be(out, (unsigned)core_type, 1);
    o_be(out, persistent ? 1 : 0, 1);
    o_be(out, (uint64_t)expiration, 8);
    o_be(out, (uint64_t)timestamp, 8);
    o_be(out, (unsigned)priority, 1);
    o_be(out, 1, 1);
    o_be(out, (uint32_t)np, 4);
    for (Py_ssize_t i = 0; i < np; i++) {
        const cprop *c = &pl->v[idx[i]];
        ob_put(out, pl->pb.p + c->off, (size_t)c->len);
    }
    if (hs != hs_local)
        PyMem_RawFree(hs);
    if (idx != idx_local)
        PyMem_RawFree(idx);
    return out->n == total; /* always: the sizes above are the layout */
}

/* migrate_records(items, first_id, address, routing_type, threshold, max_record) -> list: for each item (a
 * buffer holding one stored OpenWire message, or None) either (record, body length, redelivery counter) --
 * record the ADD_MESSAGE_PROTOCOL body of the message with id first_id + the number of buffers before it
 * (a None takes no id) -- or None: Python's path (convert + message_record) takes it. address: the address as UTF-16LE bytes, or None. A record whose
 * body is above threshold, or that needs more than max_record bytes with the journal's framing room, is None. */
PyObject *amq_migrate_records(PyObject *self, PyObject *args) {
    PyObject *items, *addr_obj;
    long long first_id;
    int routing_type;
    Py_ssize_t threshold, max_record;
    if (!PyArg_ParseTuple(args, "OLOinn:migrate_records", &items, &first_id, &addr_obj, &routing_type,
                          &threshold, &max_record))
        return NULL;
    PyObject *seq = PySequence_Fast(items, "migrate_records: items must be a sequence");
    if (seq == NULL)
        return NULL;
    conv_args a = {NULL, 0, routing_type, threshold, max_record};
    if (addr_obj != Py_None) {
        if (!PyBytes_Check(addr_obj)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "migrate_records: address must be UTF-16LE bytes or None");
            return NULL;
        }
        a.addr = (const unsigned char *)PyBytes_AS_STRING(addr_obj);
        a.addr_n = PyBytes_GET_SIZE(addr_obj);
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *res = PyList_New(n);
    plist pl = {{NULL, 0, 0, 0}, NULL, 0, 0, 0};
    outbuf out = {NULL, 0, 0, 0};
    unsigned char *scratch = NULL;
    size_t scratch_cap = 0;
    int nomem = 0;
    long long next_id = first_id;
    if (res == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *v = NULL;
        if (it != Py_None) {
            Py_buffer view;
            if (PyObject_GetBuffer(it, &view, PyBUF_SIMPLE) < 0) {
                Py_CLEAR(res);
                goto done;
            }
            Py_ssize_t blen = 0;
            int32_t redelivery = 0;
            int ok = convert_one(view.buf, view.len, (int64_t)next_id++, &a, &pl, &out, &scratch,
                                 &scratch_cap, &blen, &redelivery, &nomem);
            PyBuffer_Release(&view);
            if (nomem) {
                PyErr_NoMemory();
                Py_CLEAR(res);
                goto done;
            }
            if (ok) {
                PyObject *rec = PyBytes_FromStringAndSize(out.p, (Py_ssize_t)out.n);
                if (rec == NULL || (v = Py_BuildValue("(Nni)", rec, blen, (int)redelivery)) == NULL) {
                    Py_CLEAR(res);
                    goto done;
                }
            }
        }
        if (v == NULL)
            v = Py_NewRef(Py_None);
        PyList_SET_ITEM(res, i, v);
    }
done:
    Py_DECREF(seq);
    PyMem_RawFree(pl.pb.p);
    PyMem_RawFree(pl.v);
    PyMem_RawFree(out.p);
    PyMem_RawFree(scratch);
    return res;
}
