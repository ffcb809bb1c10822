/* The record-candidate logic of JournalImpl.readJournalFile (artemis-journal-format.md §1.5), shared by the
 * scanner (scanner.c, which returns tuples) and the loader (journal_load.c, which consumes records in C).
 *
 * Everything here is static inline: each C file gets its own copy, and the loops inline into their callers.
 * The reference is amqtool.formats.artemis.records.scan_records_py / _candidate; tests/native holds the C
 * paths to identical results.
 */
#ifndef AMQTOOL_JOURNAL_SCAN_H
#define AMQTOOL_JOURNAL_SCAN_H

#include "amqnative.h"

#include <stdint.h>
#include <string.h>

enum { EVENT = 10, ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE_TX, DELETE, PREPARE, COMMIT, ROLLBACK };

/* Fixed part of a version-2 record (checkSize included), indexed by type - 10 (§2.2). */
static const int fixed_v2[10] = {23, 23, 23, 31, 31, 30, 18, 26, 22, 18};

static inline int fixed_size(int t, int version) { return fixed_v2[t - EVENT] - (version >= 2 ? 0 : 1); }
static inline int is_tx(int t) { return t >= ADD_TX && t != DELETE; }
static inline int has_id(int t) { return t < PREPARE; }
static inline int has_body(int t) { return t <= DELETE_TX; }

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4));
}

/* Does the 8-byte word hold a byte b with 9 < b < 20 (a record type)?  The classic "hasbetween" bit
 * trick: lets the scanner cross zero filler, AIO padding and most stale bytes eight at a time. */
#define ONES (~(uint64_t)0 / 255)
#define HAS_BETWEEN(x, m, n) \
    (((ONES * (127 + (n)) - ((x) & ONES * 127)) & ~(x) & (((x) & ONES * 127) + ONES * (127 - (m)))) & ONES * 128)

static inline Py_ssize_t next_candidate(const unsigned char *b, Py_ssize_t pos, Py_ssize_t end) {
    while (pos + 8 <= end) {
        uint64_t w;
        memcpy(&w, b + pos, 8);
        if (HAS_BETWEEN(w, 9, 20))
            break;
        pos += 8;
    }
    while (pos < end && (b[pos] < EVENT || b[pos] > ROLLBACK))
        pos++;
    return pos;
}

/* Every header field of a record lies in its first WSCAN_HEAD bytes (the largest fixed part, 31, less its
 * checkSize, plus the type byte's neighbours). */
#define WSCAN_HEAD 32

typedef enum { CAND_OK, CAND_QUIET, CAND_MARK } cand_result;

typedef struct {
    int t, cc, utype;
    int64_t tx_id, rid, total;
    int32_t body_len, nrec, extra_len;
    Py_ssize_t pos; /* offset of the record (set by scan_next) */
} record_t;

/* Read the header of the candidate at pos (type in range, tag already present and checked), up to its total
 * size; `end` is where the file ends.  Mirrors the branch structure of _candidate() in records.py: which
 * failures mark the file as a data file and which are abandoned quietly follows readJournalFile branch by
 * branch.  Reads only the first WSCAN_HEAD bytes at pos: the caller compares the checkSize at
 * pos + total - 4 with r->total (the last check of readJournalFile, a CAND_MARK when it fails), so a windowed
 * reader can fetch those four bytes without holding the whole record. */
static inline cand_result candidate(const unsigned char *b, Py_ssize_t pos, Py_ssize_t end, int version,
                                    record_t *r) {
    int t = b[pos];
    Py_ssize_t p = pos + 5;
    r->t = t;
    r->cc = 0;
    if (version >= 2) {
        if (p + 1 > end)
            return CAND_MARK;
        r->cc = (int8_t)b[p];
        p += 1;
    }
    r->tx_id = -1;
    if (is_tx(t)) {
        if (p + 8 > end)
            return CAND_MARK;
        r->tx_id = be64(b + p);
        p += 8;
    }
    r->rid = -1;
    if (has_id(t)) {
        if (p + 8 > end)
            return CAND_MARK;
        r->rid = be64(b + p);
        p += 8;
    }
    r->body_len = 0;
    r->utype = 0;
    if (has_body(t)) {
        if (p + 4 > end)
            return CAND_MARK;
        r->body_len = be32(b + p);
        p += 4;
        if (t != DELETE_TX) {
            if (p + 1 > end)
                return CAND_QUIET;
            r->utype = b[p];
            p += 1;
        }
        if (r->body_len < 0 || (int64_t)p + r->body_len > (int64_t)end)
            return CAND_QUIET;
        p += r->body_len;
    }
    r->nrec = -1;
    r->extra_len = 0;
    if (t == PREPARE || t == COMMIT) {
        if (p + 4 > end)
            return CAND_QUIET;
        r->nrec = be32(b + p);
        p += 4;
        if (t == PREPARE) {
            if (p + 4 > end)
                return CAND_QUIET;
            r->extra_len = be32(b + p);
            p += 4;
            if (r->extra_len < 0)
                return CAND_MARK;
        }
    }
    int64_t total = (int64_t)fixed_size(t, version) + r->body_len + r->extra_len;
    if ((int64_t)pos + total > (int64_t)end)
        return CAND_MARK;
    r->total = total;
    return CAND_OK;
}

/* The readJournalFile loop, one accepted record per call: from *ppos, find the next record, fill *r (with
 * r->pos), move *ppos past it and return 1; return 0 at the end of the buffer.  Rejected candidates that make
 * Artemis call markAsDataFile set *marked.  Touches no Python object (safe without the GIL). */
static inline int scan_next(const unsigned char *b, Py_ssize_t *ppos, Py_ssize_t end, long long file_tag,
                            int version, int check_tag, int *marked, record_t *r) {
    Py_ssize_t pos = *ppos;
    while (pos < end) {
        pos = next_candidate(b, pos, end);
        if (pos >= end)
            break;
        if (pos + 5 > end) { /* no room for the tag: markAsDataFile */
            *marked = 1;
            pos++;
            continue;
        }
        if (check_tag && (long long)be32(b + pos + 1) != file_tag) {
            pos++; /* a record of an earlier use of this file */
            continue;
        }
        cand_result res = candidate(b, pos, end, version, r);
        if (res == CAND_OK && (int64_t)be32(b + pos + r->total - 4) != r->total)
            res = CAND_MARK;
        if (res == CAND_OK) {
            r->pos = pos;
            *ppos = pos + (Py_ssize_t)r->total;
            return 1;
        }
        if (res == CAND_MARK)
            *marked = 1;
        pos++;
    }
    *ppos = end;
    return 0;
}

#endif
