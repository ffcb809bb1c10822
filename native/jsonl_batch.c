/* JSON Lines of an Arrow record batch in C: the export's jsonl tables (amqtool.engines.export.writers).
 *
 *   jsonl_lines(columns, rows) -> bytes
 *       the text JsonlTableWriter.write gives for each row -- json.dumps(row, ensure_ascii=False,
 *       separators=(",", ":")) and "\n" -- byte for byte (tests/native/test_jsonl_batch.py holds the two
 *       equal).  columns: one tuple per column, in key order:
 *         (key, kind, array offset, validity or None, buffers...)
 *       key: the JSON text of the key and the colon ('"name":'); kind and buffers:
 *         0 int64, 1 int32: values;   2 bool: value bitmap;
 *         3 string: offsets, data;    4 binary: offsets, data (written as URL-safe base64, padded);
 *         5 list of {name, type, value} string structs: list offsets, then (offset, validity, offsets, data)
 *           for each of the three fields: JSON objects with those keys;
 *         6 map string -> string: map offsets, then (offset, validity, offsets, data) for keys and for
 *           values: a JSON object.
 *       Buffers are anything with the buffer protocol (pyarrow buffers); offsets are int32.
 *
 * Strings are Arrow strings (valid UTF-8), escaped as json.dumps escapes them with ensure_ascii=False:
 * quote, backslash, \n \r \t \b \f by name, other controls below 0x20 as \u00xx; everything else as is. */
#include "amqnative.h"
#include "outbuf.h"

#include <stdint.h>
#include <string.h>

typedef struct {
    Py_buffer b;
    int have;
} buf_t;

typedef struct {
    Py_ssize_t offset;
    buf_t valid, offs, data;
} strarr; /* a string array: offset, validity, int32 offsets, data */

typedef struct {
    PyObject *key;
    int kind;
    Py_ssize_t offset;
    buf_t valid, a, b; /* kind 0-2: a = values; 3-4: a = offsets, b = data; 5-6: a = list/map offsets */
    strarr f[3];       /* 5: name, type, value; 6: keys, values */
} col_t;

static int get_buf(PyObject *o, buf_t *b) {
    b->have = 0;
    if (o == Py_None)
        return 0;
    if (PyObject_GetBuffer(o, &b->b, PyBUF_SIMPLE) < 0)
        return -1;
    b->have = 1;
    return 0;
}

static void rel_buf(buf_t *b) {
    if (b->have)
        PyBuffer_Release(&b->b);
    b->have = 0;
}

static inline int bit(const buf_t *b, Py_ssize_t i) {
    if (!b->have)
        return 1;
    return (((const unsigned char *)b->b.buf)[i >> 3] >> (i & 7)) & 1;
}

static inline int32_t off32(const buf_t *b, Py_ssize_t i) { return ((const int32_t *)b->b.buf)[i]; }

static inline void w(outbuf *o, const char *s, size_t n) {
    if (o->nomem || ob_reserve(o, n) < 0)
        return;
    ob_put(o, s, n);
}
#define WL(o, lit) w((o), (lit), sizeof(lit) - 1)

static void w_int(outbuf *o, long long v) {
    if (o->nomem || ob_reserve(o, 24) < 0)
        return;
    ob_int(o, v);
}

static const char HX[] = "0123456789abcdef";

/* a JSON string (json.dumps, ensure_ascii=False) */
static void w_str(outbuf *o, const unsigned char *s, Py_ssize_t n) {
    if (o->nomem || ob_reserve(o, (size_t)n * 6 + 2) < 0)
        return;
    char *d = o->p + o->n;
    *d++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *d++ = (char)c;
            continue;
        }
        *d++ = '\\';
        switch (c) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '\n': *d++ = 'n'; break;
        case '\r': *d++ = 'r'; break;
        case '\t': *d++ = 't'; break;
        case '\b': *d++ = 'b'; break;
        case '\f': *d++ = 'f'; break;
        default:
            *d++ = 'u';
            *d++ = '0';
            *d++ = '0';
            *d++ = HX[c >> 4];
            *d++ = HX[c & 15];
        }
    }
    *d++ = '"';
    o->n = (size_t)(d - o->p);
}

/* binary as a JSON string of its URL-safe base64 */
static void w_b64(outbuf *o, const unsigned char *s, Py_ssize_t n) {
    WL(o, "\"");
    ob_b64url(o, s, n);
    WL(o, "\"");
}

/* element i of a string array (after its own offset), or null */
static void w_strarr(outbuf *o, const strarr *a, Py_ssize_t i) {
    i += a->offset;
    if (!bit(&a->valid, i)) {
        WL(o, "null");
        return;
    }
    int32_t s = off32(&a->offs, i), e = off32(&a->offs, i + 1);
    w_str(o, (const unsigned char *)a->data.b.buf + s, e - s);
}

static int parse_strarr(PyObject *t, strarr *a) {
    memset(a, 0, sizeof *a);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
        PyErr_SetString(PyExc_TypeError, "a child array is (offset, validity, offsets, data)");
        return -1;
    }
    a->offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 0));
    if (a->offset < 0 && PyErr_Occurred())
        return -1;
    if (get_buf(PyTuple_GET_ITEM(t, 1), &a->valid) < 0 || get_buf(PyTuple_GET_ITEM(t, 2), &a->offs) < 0 ||
        get_buf(PyTuple_GET_ITEM(t, 3), &a->data) < 0)
        return -1;
    if (!a->offs.have || !a->data.have) {
        PyErr_SetString(PyExc_TypeError, "a child array needs offsets and data");
        return -1;
    }
    return 0;
}

static void release_col(col_t *c) {
    rel_buf(&c->valid);
    rel_buf(&c->a);
    rel_buf(&c->b);
    for (int k = 0; k < 3; k++) {
        rel_buf(&c->f[k].valid);
        rel_buf(&c->f[k].offs);
        rel_buf(&c->f[k].data);
    }
}

static int parse_col(PyObject *t, col_t *c) {
    memset(c, 0, sizeof *c);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 5) {
        PyErr_SetString(PyExc_TypeError, "a column is (key, kind, offset, validity, buffers...)");
        return -1;
    }
    c->key = PyTuple_GET_ITEM(t, 0);
    if (!PyBytes_Check(c->key)) {
        PyErr_SetString(PyExc_TypeError, "a column's key is bytes");
        return -1;
    }
    c->kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
    c->offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 2));
    if (PyErr_Occurred())
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    static const int want[] = {5, 5, 5, 6, 6, 8, 7};
    if (c->kind < 0 || c->kind > 6 || n != want[c->kind]) {
        PyErr_SetString(PyExc_ValueError, "unknown column kind or wrong number of buffers");
        return -1;
    }
    if (get_buf(PyTuple_GET_ITEM(t, 3), &c->valid) < 0 || get_buf(PyTuple_GET_ITEM(t, 4), &c->a) < 0)
        return -1;
    if (!c->a.have) {
        PyErr_SetString(PyExc_TypeError, "a column needs its values or offsets");
        return -1;
    }
    if (c->kind == 3 || c->kind == 4) {
        if (get_buf(PyTuple_GET_ITEM(t, 5), &c->b) < 0)
            return -1;
        if (!c->b.have) {
            PyErr_SetString(PyExc_TypeError, "a string column needs its data");
            return -1;
        }
    } else if (c->kind >= 5) {
        int nf = c->kind == 5 ? 3 : 2;
        for (int k = 0; k < nf; k++)
            if (parse_strarr(PyTuple_GET_ITEM(t, 5 + k), &c->f[k]) < 0)
                return -1;
    }
    return 0;
}

static void w_value(outbuf *o, const col_t *c, Py_ssize_t row) {
    Py_ssize_t i = row + c->offset;
    if (!bit(&c->valid, i)) {
        WL(o, "null");
        return;
    }
    switch (c->kind) {
    case 0: w_int(o, ((const int64_t *)c->a.b.buf)[i]); break;
    case 1: w_int(o, ((const int32_t *)c->a.b.buf)[i]); break;
    case 2:
        if (bit(&c->a, i))
            WL(o, "true");
        else
            WL(o, "false");
        break;
    case 3:
    case 4: {
        int32_t s = off32(&c->a, i), e = off32(&c->a, i + 1);
        const unsigned char *d = (const unsigned char *)c->b.b.buf + s;
        if (c->kind == 3)
            w_str(o, d, e - s);
        else
            w_b64(o, d, e - s);
        break;
    }
    case 5: {
        int32_t s = off32(&c->a, i), e = off32(&c->a, i + 1);
        WL(o, "[");
        for (int32_t j = s; j < e; j++) {
            if (j > s)
                WL(o, ",");
            WL(o, "{\"name\":");
            w_strarr(o, &c->f[0], j);
            WL(o, ",\"type\":");
            w_strarr(o, &c->f[1], j);
            WL(o, ",\"value\":");
            w_strarr(o, &c->f[2], j);
            WL(o, "}");
        }
        WL(o, "]");
        break;
    }
    case 6: {
        int32_t s = off32(&c->a, i), e = off32(&c->a, i + 1);
        WL(o, "{");
        for (int32_t j = s; j < e; j++) {
            if (j > s)
                WL(o, ",");
            w_strarr(o, &c->f[0], j);
            WL(o, ":");
            w_strarr(o, &c->f[1], j);
        }
        WL(o, "}");
        break;
    }
    }
}

PyObject *amq_jsonl_lines(PyObject *self, PyObject *args) {
    PyObject *cols;
    Py_ssize_t rows;
    if (!PyArg_ParseTuple(args, "O!n", &PyTuple_Type, &cols, &rows))
        return NULL;
    Py_ssize_t nc = PyTuple_GET_SIZE(cols);
    col_t *c = PyMem_Calloc((size_t)(nc ? nc : 1), sizeof(col_t));
    if (c == NULL)
        return PyErr_NoMemory();
    PyObject *out = NULL;
    Py_ssize_t parsed = 0;
    for (; parsed < nc; parsed++)
        if (parse_col(PyTuple_GET_ITEM(cols, parsed), &c[parsed]) < 0) {
            parsed++;
            goto done;
        }
    outbuf o = {NULL, 0, 0, 0};
    for (Py_ssize_t r = 0; r < rows && !o.nomem; r++) {
        WL(&o, "{");
        for (Py_ssize_t k = 0; k < nc; k++) {
            if (k)
                WL(&o, ",");
            w(&o, PyBytes_AS_STRING(c[k].key), (size_t)PyBytes_GET_SIZE(c[k].key));
            w_value(&o, &c[k], r);
        }
        WL(&o, "}\n");
    }
    if (o.nomem)
        PyErr_NoMemory();
    else
        out = PyBytes_FromStringAndSize(o.p ? o.p : "", (Py_ssize_t)o.n);
    PyMem_RawFree(o.p);
done:
    for (Py_ssize_t k = 0; k < parsed && k < nc; k++)
        release_col(&c[k]);
    PyMem_Free(c);
    return out;
}
