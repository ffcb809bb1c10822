/* The Artemis journal record scanner: JournalImpl.readJournalFile (artemis-journal-format.md §1.5).
 *
 * Same contract and same tuples as amqtool.formats.artemis.records.scan_records_py, which is the
 * reference: tests/native/test_scanner.py holds the two to identical results on every fixture file and on
 * random and mutated bytes.  A tuple is
 *   (type, offset, size, compact_count, tx_id, record_id, user_record_type, body_len, number_of_records,
 *    extra_len)
 * with tx_id = -1 where the type has none, record_id = -1 for PREPARE/COMMIT/ROLLBACK,
 * number_of_records = -1 except PREPARE/COMMIT, extra_len = 0 except PREPARE.
 */
#include "journal_window.h"

PyObject *amq_scan_records(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"buf", "file_tag", "version", "check_tag", "start", NULL};
    Py_buffer view;
    long long file_tag;
    int version;
    int check_tag = 1;
    Py_ssize_t start = 16;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*Li|pn:scan_records", kwlist, &view, &file_tag, &version,
                                     &check_tag, &start))
        return NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t end = view.len;
    PyObject *records = PyList_New(0);
    if (records == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int marked = 0;
    Py_ssize_t pos = start < 0 ? 0 : start;
    record_t r;
    while (scan_next(b, &pos, end, file_tag, version, check_tag, &marked, &r)) {
        PyObject *tup = Py_BuildValue("(inLiLLiiii)", r.t, r.pos, (long long)r.total, r.cc, (long long)r.tx_id,
                                      (long long)r.rid, r.utype, (int)r.body_len, (int)r.nrec, (int)r.extra_len);
        if (tup == NULL || PyList_Append(records, tup) < 0) {
            Py_XDECREF(tup);
            Py_DECREF(records);
            PyBuffer_Release(&view);
            return NULL;
        }
        Py_DECREF(tup);
    }
    PyBuffer_Release(&view);
    PyObject *result = Py_BuildValue("(NO)", records, marked ? Py_True : Py_False);
    return result;
}

/* scan_window(fd, pos, file_tag, version, check_tag=True, marked=False, window=4 MiB)
 *   -> (base, data, records, next_pos, marked, done)
 * The records of one window of an open journal file, scanning from `pos` as scan_records would over the
 * whole file (journal_window.h): `data` is the file's bytes from `base`, every record of `records` (tuples
 * as scan_records', offsets relative to `base`) lies wholly inside it, and the scan goes on at `next_pos`
 * unless `done` (the end of the file was reached).  A record larger than `window` comes in a window of its own size. */
PyObject *amq_scan_window(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"fd", "pos", "file_tag", "version", "check_tag", "marked", "window", NULL};
    int fd, version, check_tag = 1, marked = 0;
    long long pos, file_tag;
    Py_ssize_t window = 4 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iLLi|ppn:scan_window", kwlist, &fd, &pos, &file_tag, &version,
                                     &check_tag, &marked, &window))
        return NULL;
    if (version != 1 && version != 2) {
        PyErr_Format(PyExc_ValueError, "journal format version %d, expected 1 or 2", version);
        return NULL;
    }
    wfile w;
    int rc;
    int64_t p = pos < 0 ? 0 : pos;
    Py_BEGIN_ALLOW_THREADS
    rc = wopen(&w, fd, NULL, 0, window, 0);
    if (rc == 0 && p > 0)
        rc = wfill(&w, p, 0);
    Py_END_ALLOW_THREADS
    PyObject *records = NULL, *data = NULL;
    if (rc < 0)
        goto ioerr;
    records = PyList_New(0);
    if (records == NULL)
        goto fail;
    record_t r;
    int done = 0;
    for (;;) {
        rc = wscan_next(&w, &p, file_tag, version, check_tag, &marked, &r);
        if (rc == 2) {
            if (PyList_GET_SIZE(records) > 0)
                break; /* the next call starts a window at p */
            int frc;
            Py_BEGIN_ALLOW_THREADS
            frc = wfill(&w, p, w.need);
            Py_END_ALLOW_THREADS
            if (frc < 0)
                goto ioerr;
            continue;
        }
        if (rc < 0)
            goto ioerr;
        if (rc == 0) {
            done = 1;
            break;
        }
        PyObject *tup = Py_BuildValue("(inLiLLiiii)", r.t, (Py_ssize_t)(r.pos - w.base), (long long)r.total, r.cc,
                                      (long long)r.tx_id, (long long)r.rid, r.utype, (int)r.body_len, (int)r.nrec,
                                      (int)r.extra_len);
        if (tup == NULL || PyList_Append(records, tup) < 0) {
            Py_XDECREF(tup);
            goto fail;
        }
        Py_DECREF(tup);
    }
    data = PyBytes_FromStringAndSize((const char *)w.buf, (Py_ssize_t)w.len);
    if (data == NULL)
        goto fail;
    free(w.buf);
    return Py_BuildValue("(LNNLOO)", (long long)w.base, data, records, (long long)p, marked ? Py_True : Py_False,
                         done ? Py_True : Py_False);
ioerr:
    errno = w.err ? w.err : EIO;
    if (errno == ENOMEM)
        PyErr_NoMemory();
    else
        PyErr_SetFromErrno(PyExc_OSError);
fail:
    free(w.buf);
    Py_XDECREF(records);
    return NULL;
}

/* checksize_ends(buf, smallest) -> [end, ...]: every end in smallest..len(buf) where the four bytes before it,
 * read big-endian (a record's checkSize), equal end: where a record starting at offset 0 could end.  Same
 * result as amqtool.formats.artemis.records.checksize_ends_py, the reference (tests/native/test_scanner.py). */
PyObject *amq_checksize_ends(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t smallest;
    if (!PyArg_ParseTuple(args, "y*n:checksize_ends", &view, &smallest))
        return NULL;
    const unsigned char *b = view.buf;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t e = smallest < 4 ? 4 : smallest;
    for (; e <= view.len; e++) {
        const unsigned char *p = b + e - 4;
        unsigned long long v = ((unsigned long long)p[0] << 24) | ((unsigned long long)p[1] << 16) |
                               ((unsigned long long)p[2] << 8) | (unsigned long long)p[3];
        if (v != (unsigned long long)e)
            continue;
        PyObject *n = PyLong_FromSsize_t(e);
        if (n == NULL || PyList_Append(out, n) < 0) {
            Py_XDECREF(n);
            Py_DECREF(out);
            PyBuffer_Release(&view);
            return NULL;
        }
        Py_DECREF(n);
    }
    PyBuffer_Release(&view);
    return out;
}
