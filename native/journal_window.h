/* Reading a journal file through a bounded window: readJournalFile's scan (journal_scan.h) without holding
 * the file in memory.
 *
 * Artemis reads a whole journal file into one buffer (JournalImpl.readJournalFile); a tool that did the same
 * would need as much memory as the largest file (2 GiB for a file at the int limit).  Here the file is read
 * with pread into a window of `window` bytes that slides forward; a record is always handed over whole, inside
 * the window: a record that straddles the window's end makes the window restart at the record, and one
 * larger than the window grows the buffer to that record, once its checkSize (read on its own) proves it is a
 * record.  Memory is then the window plus the largest valid record, whatever the file's size.
 *
 * The scan is the same as scan_next's over the whole file: every decision that depends on where the file
 * ends uses the file's size, never the window's end (tests/native hold the two to identical results with
 * windows of a few bytes).
 *
 * Verify's filler accounting (the non-filler bytes between and after records) is kept here too, because the
 * bytes of a gap may leave the window before the next record is found: w_track_region is run over every
 * byte range as it leaves the window.
 *
 * Everything is static inline and touches no Python object: the loader calls it without the GIL.
 */
#ifndef AMQTOOL_JOURNAL_WINDOW_H
#define AMQTOOL_JOURNAL_WINDOW_H

#include "journal_scan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define WINDOW_MIN 64 /* more than WSCAN_HEAD: a refill always moves the scan forward */

typedef struct {
    int fd;
    int64_t size;       /* the file's size when opened (smaller if a read finds it shrank) */
    unsigned char *buf; /* owned by the caller (reused across files) */
    size_t cap;
    int64_t base;       /* file offset of buf[0] */
    int64_t len;        /* valid bytes in buf */
    int64_t window;     /* bytes read per refill */
    int64_t need;       /* after wscan_next returned 2: bytes wanted from *ppos */
    int err;            /* errno of a failed read */
    /* filler accounting, when `track` is set */
    int track;
    int64_t track_from; /* bytes before this were accounted for */
    int64_t gap_first;  /* first byte neither 0 nor 'J' since the last reset, or -1 */
    int64_t gap_end_nz; /* just past the last non-zero byte since gap_first, or -1 */
} wfile;

/* First byte in [s, e) that is neither 0 nor 'J' (Artemis' fillers), or -1. */
static inline Py_ssize_t first_non_filler(const unsigned char *b, Py_ssize_t s, Py_ssize_t e) {
    while (s + 8 <= e) {
        uint64_t w;
        memcpy(&w, b + s, 8);
        if (w != 0 && w != 0x4A4A4A4A4A4A4A4AULL) {
            for (int k = 0; k < 8; k++)
                if (b[s + k] != 0 && b[s + k] != 'J')
                    return s + k;
        }
        s += 8;
    }
    for (; s < e; s++)
        if (b[s] != 0 && b[s] != 'J')
            return s;
    return -1;
}

/* Just past the last non-zero byte in [s, e), or -1. */
static inline Py_ssize_t end_non_zero(const unsigned char *b, Py_ssize_t s, Py_ssize_t e) {
    while (e - 8 >= s) {
        uint64_t w;
        memcpy(&w, b + e - 8, 8);
        if (w != 0)
            break;
        e -= 8;
    }
    while (e > s && b[e - 1] == 0)
        e--;
    return e > s ? e : -1;
}

static inline void w_track_reset(wfile *w, int64_t from) {
    w->track_from = from;
    w->gap_first = -1;
    w->gap_end_nz = -1;
}

/* Account for the bytes [track_from, upto) that are in the window (regions come in file order). */
static inline void w_track_region(wfile *w, int64_t upto) {
    if (!w->track)
        return;
    int64_t a = w->track_from < w->base ? w->base : w->track_from;
    int64_t b = upto > w->base + w->len ? w->base + w->len : upto;
    if (a < b) {
        Py_ssize_t ra = (Py_ssize_t)(a - w->base), rb = (Py_ssize_t)(b - w->base);
        if (w->gap_first < 0) {
            Py_ssize_t f = first_non_filler(w->buf, ra, rb);
            if (f >= 0)
                w->gap_first = w->base + f;
        }
        if (w->gap_first >= 0) {
            Py_ssize_t lo = w->gap_first - w->base > ra ? (Py_ssize_t)(w->gap_first - w->base) : ra;
            Py_ssize_t z = end_non_zero(w->buf, lo, rb);
            if (z >= 0)
                w->gap_end_nz = w->base + z;
        }
    }
    if (upto > w->track_from)
        w->track_from = upto;
}

/* pread until `n` bytes or the end of the file; the count read, or -1 (errno set). */
static inline int64_t pread_full(int fd, unsigned char *into, int64_t n, int64_t at) {
    int64_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, into + got, (size_t)(n - got), (off_t)(at + got));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (k == 0)
            break;
        got += k;
    }
    return got;
}

/* Start the window at `pos` holding max(window, want) bytes (fewer at the end of the file).  Bytes of the old
 * window from pos on are kept, not read again.  0, or -1 with w->err set. */
static inline int wfill(wfile *w, int64_t pos, int64_t want) {
    w_track_region(w, pos);
    if (want < w->window)
        want = w->window;
    if (pos > w->size)
        pos = w->size;
    if (want > w->size - pos)
        want = w->size - pos;
    if ((size_t)want > w->cap) {
        unsigned char *nb = realloc(w->buf, (size_t)want);
        if (nb == NULL) {
            w->err = ENOMEM;
            return -1;
        }
        w->buf = nb;
        w->cap = (size_t)want;
    }
    int64_t keep = 0;
    if (pos >= w->base && pos < w->base + w->len) {
        keep = w->base + w->len - pos;
        if (keep > want)
            keep = want;
        memmove(w->buf, w->buf + (pos - w->base), (size_t)keep);
    }
    int64_t got = pread_full(w->fd, w->buf + keep, want - keep, pos + keep);
    if (got < 0) {
        w->err = errno;
        w->len = 0;
        return -1;
    }
    w->base = pos;
    w->len = keep + got;
    if (w->len < want)
        w->size = pos + w->len; /* the file shrank while we read it: it ends here now */
    else if (w->size > pos + w->len)
        /* let the kernel read the next window while this one is scanned */
        posix_fadvise(w->fd, (off_t)(pos + w->len), (off_t)w->window, POSIX_FADV_WILLNEED);
    return 0;
}

/* Open the window over `fd` (size from fstat) at offset 0.  `buf`/`cap` are the caller's buffer (may be
 * NULL/0; wfill grows it).  0, or -1 with w->err set. */
static inline int wopen(wfile *w, int fd, unsigned char *buf, size_t cap, int64_t window, int track) {
    struct stat st;
    memset(w, 0, sizeof *w);
    w->fd = fd;
    w->buf = buf;
    w->cap = cap;
    w->window = window < WINDOW_MIN ? WINDOW_MIN : window;
    w->track = track;
    w_track_reset(w, 16);
    if (fstat(fd, &st) < 0) {
        w->err = errno;
        return -1;
    }
    w->size = st.st_size;
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return wfill(w, 0, 0);
}

/* scan_next over the window: 1 with the next record in *r (r->pos a file offset; the whole record is in the
 * window), 0 at the end of the file, 2 when the window must first be refilled at *ppos with at least w->need
 * bytes (wfill), -1 on a read error (w->err). */
static inline int wscan_next(wfile *w, int64_t *ppos, long long file_tag, int version, int check_tag,
                             int *marked, record_t *r) {
    int64_t pos = *ppos;
    for (;;) {
        int64_t wend = w->base + w->len;
        if (pos >= w->size) {
            *ppos = w->size;
            return 0;
        }
        if (pos < w->base || pos >= wend) {
            *ppos = pos;
            w->need = 0;
            return 2;
        }
        const unsigned char *b = w->buf;
        Py_ssize_t end = (Py_ssize_t)w->len;
        Py_ssize_t rel = next_candidate(b, (Py_ssize_t)(pos - w->base), end);
        pos = w->base + rel;
        if (rel >= end)
            continue;
        if (rel + WSCAN_HEAD > end && wend < w->size) { /* the header may run past the window */
            *ppos = pos;
            w->need = WSCAN_HEAD;
            return 2;
        }
        Py_ssize_t fend = (Py_ssize_t)(w->size - w->base); /* the file's end, in window offsets */
        if (rel + 5 > fend) { /* no room for the tag: markAsDataFile */
            *marked = 1;
            pos++;
            continue;
        }
        if (check_tag && (long long)be32(b + rel + 1) != file_tag) {
            pos++; /* a record of an earlier use of this file */
            continue;
        }
        cand_result res = candidate(b, rel, fend, version, r);
        if (res == CAND_OK) {
            int64_t at = pos + r->total - 4;
            int32_t check;
            if (at + 4 <= wend) {
                check = be32(b + (at - w->base));
            } else {
                unsigned char four[4];
                int64_t got = pread_full(w->fd, four, 4, at);
                if (got < 0) {
                    w->err = errno;
                    return -1;
                }
                check = got == 4 ? be32(four) : -1;
            }
            if ((int64_t)check != r->total) {
                res = CAND_MARK;
            } else if (pos + r->total > wend) { /* a record: have all of it in the window */
                *ppos = pos;
                w->need = r->total;
                return 2;
            } else {
                r->pos = (Py_ssize_t)pos;
                *ppos = pos + r->total;
                return 1;
            }
        }
        if (res == CAND_MARK)
            *marked = 1;
        pos++;
    }
}

#endif
