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
#include "journal_scan.h"

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
