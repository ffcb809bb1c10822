/* The walk over one journal file's packed live entries (amqnative.h: LIVE_ENTRY, live_entry) that the C readers
 * of the messages journal share: describe_live (describe.c), stat_live (queue_stat.c), tally_live
 * (queue_tally.c). Each is called with the live list, a range start..stop of it and a file index, and reads
 * entries from start until stop or until an entry of another file. */
#ifndef AMQTOOL_LIVE_WALK_H
#define AMQTOOL_LIVE_WALK_H

#include "amqnative.h"

/* start..stop within a live list of `len` bytes: 1, or 0 with IndexError("<who> range out of bounds"). */
static inline int live_range_ok(Py_ssize_t len, Py_ssize_t start, Py_ssize_t stop, const char *who) {
    if (start < 0 || stop > len / LIVE_ENTRY || start > stop) {
        PyErr_Format(PyExc_IndexError, "%s range out of bounds", who);
        return 0;
    }
    return 1;
}

/* Entry i of the live list `lb` with its record id, body offset and body length unpacked, or NULL when it is
 * an entry of another file than `file_index` (where the walk stops). */
static inline const unsigned char *live_entry_of_file(const unsigned char *lb, Py_ssize_t i, int file_index,
                                                      int64_t *id, int64_t *off, int32_t *blen) {
    const unsigned char *e = lb + i * LIVE_ENTRY;
    int32_t fi;
    live_entry(e, id, &fi, off, blen);
    return fi == file_index ? e : NULL;
}

#endif
