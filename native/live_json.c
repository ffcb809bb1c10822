/* The "live" array of `print --format json` in C: the JSON text of a run of live entries whose bodies lie in
 * one journal file, byte for byte what amqtool.engines.journal_print writes for each entry with
 * json.dumps(record_json(...), ensure_ascii=False):
 *
 *   {"id": 1, "userRecordType": 45, "isUpdate": false, "compactCount": 0, "bodySize": 3,
 *    "bodySha256": "...", "file": "activemq-data-1.amq", "offset": 31, "recordType": "ADD_MESSAGE", "body": "..."}
 *
 * (one line; "body" -- URL-safe base64 -- unless safe).  tests/native/test_live_json.py holds the
 * two to identical text.
 *
 * SHA-256 comes from the libcrypto the interpreter already uses for hashlib, found with dlopen at first use:
 * three direct calls per body cost a fraction of hashlib's per-object overhead (an EVP fetch per object in
 * OpenSSL 3) and use the CPU's SHA extensions.
 * Without libcrypto, sha256_available() says so and Python keeps its per-record path.
 */
#include "amqnative.h"
#include "outbuf.h"

#include <stdint.h>
#include <string.h>

PyObject *amq_sha256_available(PyObject *self, PyObject *noargs) {
    return PyBool_FromLong(amq_sha256_ready());
}

/* One packed live entry: native.LIVE_FORMAT "=qB?biqi" (journal_load.c). */

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Two output characters per 12 input bits: one table load instead of two (~2x the one-character loop). */
static char b64pairs[4096][2];
static int b64pairs_ready;

static void b64pairs_init(void) {
    for (int i = 0; i < 4096; i++) {
        b64pairs[i][0] = b64url[i >> 6];
        b64pairs[i][1] = b64url[i & 63];
    }
    b64pairs_ready = 1;
}

static void ob_b64(outbuf *o, const unsigned char *s, size_t n) {
    char *d = o->p + o->n;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        memcpy(d, b64pairs[v >> 12], 2);
        memcpy(d + 2, b64pairs[v & 0xFFF], 2);
        d += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *d++ = b64url[v >> 18];
        *d++ = b64url[(v >> 12) & 63];
        *d++ = '=';
        *d++ = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        *d++ = b64url[v >> 18];
        *d++ = b64url[(v >> 12) & 63];
        *d++ = b64url[(v >> 6) & 63];
        *d++ = '=';
    }
    o->n = (size_t)(d - o->p);
}

#define PUT(o, lit) ob_put(o, lit, sizeof(lit) - 1)

/* live_json(live, start, stop, data, file_index, file_name_json, type_names_json, safe, first[, base,
 *           file_size, raw]) -> (text, next)
 * Formats entries start.. of the packed live buffer while they are in file `file_index` (whose bytes from
 * `base` are `data`), stopping at `stop`, at the first entry of another file or at one whose body is not in
 * `data` (live_run says where beforehand); `next` is where it stopped. Each entry is preceded by "\n  " (the
 * very first of the array, when `first`) or ",\n  ". `raw`: the text as UTF-8 bytes (for a binary stream)
 * instead of str. */
PyObject *amq_live_json(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"live", "start", "stop", "data", "file_index", "file_name_json", "type_names_json",
                             "safe", "first", "base", "file_size", "raw", NULL};
    Py_buffer live, data;
    Py_ssize_t start, stop;
    int file_index, safe, first;
    const char *fname;
    Py_ssize_t fname_len;
    PyObject *types;
    long long wbase = 0, fsize = -1;
    int raw = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nny*is#O!pp|LLp:live_json", kwlist, &live, &start, &stop,
                                     &data, &file_index, &fname, &fname_len, &PyTuple_Type, &types, &safe, &first,
                                     &wbase, &fsize, &raw))
        return NULL;
    PyObject *result = NULL;
    const char *tnames[256];
    Py_ssize_t tlens[256];
    if (!amq_sha256_ready()) {
        PyErr_SetString(PyExc_RuntimeError, "no libcrypto SHA256 found");
        goto done;
    }
    if (!b64pairs_ready) /* under the GIL: set once before any thread-free use */
        b64pairs_init();
    if (PyTuple_GET_SIZE(types) != 256) {
        PyErr_SetString(PyExc_ValueError, "type_names_json must hold 256 strings");
        goto done;
    }
    for (int i = 0; i < 256; i++) {
        PyObject *s = PyTuple_GET_ITEM(types, i);
        if (!PyUnicode_Check(s) || (tnames[i] = PyUnicode_AsUTF8AndSize(s, &tlens[i])) == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "type_names_json must hold str");
            goto done;
        }
    }
    Py_ssize_t total = live.len / LIVE_ENTRY;
    if (start < 0 || stop > total || start > stop) {
        PyErr_SetString(PyExc_IndexError, "live_json range out of bounds");
        goto done;
    }
    outbuf o = {NULL, 0, 0, 0};
    const unsigned char *lb = live.buf, *db = data.buf;
    Py_ssize_t dlen = data.len, i = start;
    Py_BEGIN_ALLOW_THREADS
    for (; i < stop; i++) {
        const unsigned char *e = lb + i * LIVE_ENTRY;
        int64_t id, off;
        int32_t fi, blen;
        live_entry(e, &id, &fi, &off, &blen);
        if (fi != file_index)
            break;
        int utype = e[8], upd = e[9], cc = (int8_t)e[10];
        /* the bytes LoadResult.body() would read now: fewer if the file is shorter */
        Py_ssize_t bs, be;
        if (!body_in_window(off, blen, wbase, dlen, fsize, &bs, &be))
            break;
        size_t need = 256 + (size_t)fname_len + (size_t)tlens[utype] + (safe ? 0 : (size_t)(be - bs) / 3 * 4 + 16);
        if (ob_reserve(&o, need) < 0)
            break;
        if (first) {
            PUT(&o, "\n  ");
            first = 0;
        } else {
            PUT(&o, ",\n  ");
        }
        PUT(&o, "{\"id\": ");
        ob_int(&o, id);
        PUT(&o, ", \"userRecordType\": ");
        ob_int(&o, utype);
        if (upd)
            PUT(&o, ", \"isUpdate\": true, \"compactCount\": ");
        else
            PUT(&o, ", \"isUpdate\": false, \"compactCount\": ");
        ob_int(&o, cc);
        PUT(&o, ", \"bodySize\": ");
        ob_int(&o, blen);
        PUT(&o, ", \"bodySha256\": \"");
        unsigned char md[32];
        amq_sha256(db + bs, (size_t)(be - bs), md);
        static const char hex[] = "0123456789abcdef";
        for (int k = 0; k < 32; k++) {
            o.p[o.n++] = hex[md[k] >> 4];
            o.p[o.n++] = hex[md[k] & 15];
        }
        PUT(&o, "\", \"file\": ");
        ob_put(&o, fname, (size_t)fname_len);
        PUT(&o, ", \"offset\": ");
        ob_int(&o, off);
        PUT(&o, ", \"recordType\": ");
        ob_put(&o, tnames[utype], (size_t)tlens[utype]);
        if (!safe) {
            PUT(&o, ", \"body\": \"");
            ob_b64(&o, db + bs, (size_t)(be - bs));
            PUT(&o, "\"");
        }
        PUT(&o, "}");
    }
    Py_END_ALLOW_THREADS
    if (o.nomem) {
        PyMem_RawFree(o.p);
        PyErr_NoMemory();
        goto done;
    }
    PyObject *text = raw ? PyBytes_FromStringAndSize(o.p ? o.p : "", (Py_ssize_t)o.n)
                         : PyUnicode_DecodeUTF8(o.p ? o.p : "", (Py_ssize_t)o.n, "strict");
    PyMem_RawFree(o.p);
    if (text != NULL)
        result = Py_BuildValue("(Nn)", text, i);
done:
    PyBuffer_Release(&live);
    PyBuffer_Release(&data);
    return result;
}

/* live_run(live, start, stop, file_index, data_len[, base, file_size]) -> next: where live_json over the same
 * window would stop (another file's entry, or a body not in the window's data_len bytes from base), without
 * formatting anything: so that runs can be cut first and formatted on several threads. */
PyObject *amq_live_run(PyObject *self, PyObject *args) {
    Py_buffer live;
    Py_ssize_t start, stop, dlen;
    int file_index;
    long long wbase = 0, fsize = -1;
    if (!PyArg_ParseTuple(args, "y*nnin|LL:live_run", &live, &start, &stop, &file_index, &dlen, &wbase, &fsize))
        return NULL;
    Py_ssize_t total = live.len / LIVE_ENTRY, i = start;
    if (start < 0 || stop > total || start > stop) {
        PyBuffer_Release(&live);
        PyErr_SetString(PyExc_IndexError, "live_run range out of bounds");
        return NULL;
    }
    const unsigned char *lb = live.buf;
    for (; i < stop; i++) {
        int64_t id, off;
        int32_t fi, blen;
        live_entry(lb + i * LIVE_ENTRY, &id, &fi, &off, &blen);
        Py_ssize_t bs, be;
        if (fi != file_index || !body_in_window(off, blen, wbase, dlen, fsize, &bs, &be))
            break;
    }
    PyBuffer_Release(&live);
    return PyLong_FromSsize_t(i);
}
