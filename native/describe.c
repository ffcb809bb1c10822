/* `print --style artemis` in C: the `artemis data print` text of journal records (DescribeJournal), byte for
 * byte what amqtool.engines.artemis.describe writes through the Python decoders of
 * amqtool.formats.artemis.userrecords / message / primitives (the reference).
 *
 * Two entry points (reached only through amqtool/native.py):
 *
 *   describe_body(user_record_type, body, record_id, is_update, safe) -> str or None
 *       the <obj> part of one line (describe_user_record); None when C does not cover the record, and
 *       Python writes it.
 *   describe_lines(data, version, records, safe) -> list of str and int
 *       the `operation@...` lines of one journal file's scanned records (the tuples of scan_records):
 *       each str is a run of lines joined by "\n", each int the index of a record Python writes itself.
 *
 * C covers the records that fill real journals (message adds of core messages, refs, acks, cursor acks,
 * duplicate ids, delivery counts, scheduled times, page transactions, counters, ...). Anything else --
 * AMQP messages, bindings-journal configuration, Xids, page-counter updates (which carry print state),
 * prepare records -- and every body whose decoding is in any doubt (a bound crossed, a lone surrogate, a
 * date outside Python's range) is handed back, so the Python path stays the one definition of the text,
 * including its "** undecodable: ... **" messages. Every read of the untrusted bytes is bounds-checked.
 */
#include "core_codec.h"
#include "live_walk.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TypedProperties.describe: "TypedProperties[k=v, ...]" in the reader's HashMap order. -1: Python's. */
static int put_props(outbuf *o, const unsigned char *buf, prop *ps, Py_ssize_t n) {
    if (n > 4096) /* the duplicate check is quadratic: leave huge maps to Python */
        return -1;
    PUTL(o, "TypedProperties[");
    if (n > 0) {
        int small[64];
        int *idx = n <= 64 ? small : PyMem_RawMalloc(sizeof(int) * (size_t)n);
        if (idx == NULL) {
            o->nomem = 1;
            return 0;
        }
        Py_ssize_t m = props_reader_order(ps, n, idx);
        int rc = 0;
        for (Py_ssize_t j = 0; j < m && rc == 0; j++) {
            const prop *p = &ps[idx[j]];
            if (j)
                PUTL(o, ", ");
            if (put_utf16(o, p->key, p->klen, 0) < 0)
                rc = -1;
            PUTL(o, "=");
            if (rc == 0 && put_value(o, buf, p) < 0)
                rc = -1;
        }
        if (idx != small)
            PyMem_RawFree(idx);
        if (rc < 0)
            return -1;
    }
    PUTL(o, "]");
    return 0;
}

/* ---- the core message (type 45, persister 1): message.CoreMessage.describe ---- */

static int put_nss(outbuf *o, const unsigned char *s, Py_ssize_t n, int present) {
    if (!present) {
        PUTL(o, "null");
        return 0;
    }
    return put_utf16(o, s, n, 0);
}

/* mode 0: MessageDescribe ("Message(messageID=..;msg=CoreMessage[...]@0"); mode 1: data print's paged form
 * (",userMessageID=<uid or empty>, msg=CoreMessage[...]@0"); safe: "CoreMessage(safe data, size=N)" after
 * ", msg=" in mode 1. */
static int describe_core(outbuf *o, rd *r, int safe, int mode) {
    int64_t mid = r_i64(r);
    const unsigned char *addr = NULL;
    Py_ssize_t alen = 0;
    int apresent = r_u8(r) != 0;
    if (apresent)
        r_ss(r, &addr, &alen);
    int32_t buf_len = r_i32(r);
    if (r->bad || buf_len < 4 || buf_len > r->end - r->pos)
        return -1;
    rd in = {r->p, r->pos, r->pos + buf_len, 0};
    r->pos += buf_len;
    int32_t eob = r_i32(&in);
    int64_t body_len = (int64_t)eob - 13;
    if (in.bad || body_len < 0 || !need(&in, (Py_ssize_t)body_len))
        return -1;
    in.pos += (Py_ssize_t)body_len;
    /* MessageHeaders.read */
    (void)r_i64(&in); /* the buffer's messageID: the persister's wins */
    const unsigned char *haddr = NULL;
    Py_ssize_t halen = 0;
    int hpresent = r_u8(&in) != 0;
    if (hpresent)
        r_ss(&in, &haddr, &halen);
    const unsigned char *uid = NULL;
    if (r_u8(&in) == 1) {
        if (need(&in, 16)) {
            uid = in.p + in.pos;
            in.pos += 16;
        }
    }
    (void)r_i8(&in); /* type */
    int durable = r_u8(&in) != 0;
    int64_t expiration = r_i64(&in);
    int64_t timestamp = r_i64(&in);
    int priority = r_i8(&in);
    prop *ps = NULL;
    Py_ssize_t np = read_props(&in, &ps);
    if (in.bad) {
        if (in.bad == 2)
            o->nomem = 1;
        return -1;
    }
    /* encode_size: bufLen, or with the persister's address re-encoded in place of the buffer's */
    int64_t size = buf_len;
    int same = apresent == hpresent && (!apresent || (alen == halen && memcmp(addr, haddr, (size_t)alen) == 0));
    if (!same) {
        Py_ssize_t tail = in.end - in.pos;
        size = (int64_t)buf_len - tail - (hpresent ? 5 + halen : 1) + (apresent ? 5 + alen : 1);
    }
    int rc = 0;
    if (safe) {
        if (mode == 1)
            PUTL(o, ", msg=");
        PUTL(o, "CoreMessage(safe data, size=");
        put_int(o, size);
        PUTL(o, ")");
    } else {
        if (mode == 1) {
            PUTL(o, ",userMessageID=");
            if (uid)
                put_uuid(o, uid);
            PUTL(o, ", msg=");
        } else {
            PUTL(o, "Message(messageID=");
            put_int(o, mid);
            if (uid) {
                PUTL(o, ";userMessageID=");
                put_uuid(o, uid);
            }
            PUTL(o, ";msg=");
        }
        PUTL(o, "CoreMessage[messageID=");
        put_int(o, mid);
        PUTL(o, ", durable=");
        put_bool(o, durable);
        PUTL(o, ", userID=");
        if (uid)
            put_uuid(o, uid);
        else
            PUTL(o, "null");
        PUTL(o, ", priority=");
        put_int(o, priority);
        PUTL(o, ", timestamp=");
        if (put_date(o, timestamp) < 0)
            rc = -1;
        PUTL(o, ", expiration=");
        if (put_date(o, expiration) < 0)
            rc = -1;
        PUTL(o, ", durable=");
        put_bool(o, durable);
        PUTL(o, ", address=");
        if (put_nss(o, addr, alen, apresent) < 0)
            rc = -1;
        PUTL(o, ", size=");
        put_int(o, size);
        PUTL(o, ", properties=");
        if (rc == 0 && put_props(o, in.p, ps, np) < 0)
            rc = -1;
        PUTL(o, "]@0");
    }
    if (ps)
        PyMem_RawFree(ps);
    return rc;
}

/* ---- one body: describe_user_record ---- */

/* "<l1><v1><close>", "<l1><v1><l2><v2><close>", ...: the text of a record whose fields are integers, each
 * after its label -- the shape of most DescribeJournal encodings' toString. */
static inline void put_int1(outbuf *o, const char *l1, long long v1, const char *close) {
    puts_(o, l1);
    put_int(o, v1);
    puts_(o, close);
}
static inline void put_int2(outbuf *o, const char *l1, long long v1, const char *l2, long long v2, const char *close) {
    puts_(o, l1);
    put_int(o, v1);
    put_int1(o, l2, v2, close);
}
static inline void put_int3(outbuf *o, const char *l1, long long v1, const char *l2, long long v2, const char *l3,
                            long long v3, const char *close) {
    puts_(o, l1);
    put_int(o, v1);
    put_int2(o, l2, v2, l3, v3, close);
}

static void put_position(outbuf *o, int64_t page, int32_t msg) {
    put_int2(o, "PagePositionImpl [pageNr=", page, ", messageNr=", msg, ", recordID=-1]");
}

/* The <obj> text of one record into o: 0 done, -1 Python's (o rolled back by the caller). */
static int describe_obj(outbuf *o, int utype, const unsigned char *body, Py_ssize_t len, int64_t rid, int is_update,
                        int safe) {
    rd r = {body, 0, len, 0};
    switch (utype) {
    case 32:
    case 33: {
        int64_t q = r_i64(&r);
        if (r.bad)
            return -1;
        put_int1(o, utype == 32 ? "AddRef;QueueEncoding [queueID=" : "ACK;QueueEncoding [queueID=", q, "]");
        return 0;
    }
    case 34: {
        int64_t q = r_i64(&r);
        int32_t c = r_i32(&r);
        if (r.bad)
            return -1;
        put_int2(o, "DeliveryCountUpdateEncoding [queueID=", q, ", count=", c, "]");
        return 0;
    }
    case 35: {
        int64_t a = r_i64(&r);
        int32_t b = r_i32(&r);
        if (r.bad)
            return -1;
        if (is_update)
            put_int2(o, "PageUpdateTXEncoding [pageTX=", a, ", records=", b, "]");
        else
            put_int3(o, "PageTransactionInfoImpl(transactionID=", a, ",id=", rid, ",numberOfMessages=", b, ")");
        return 0;
    }
    case 36: {
        int64_t q = r_i64(&r), t = r_i64(&r);
        if (r.bad)
            return -1;
        put_int2(o, "ScheduledDeliveryEncoding [scheduledDeliveryTime=", t, ", queueID=", q, "]");
        return 0;
    }
    case 37: {
        const unsigned char *a = NULL;
        Py_ssize_t an = 0;
        r_ss(&r, &a, &an);
        int32_t n = r_i32(&r);
        if (r.bad || n < 0 || !need(&r, n))
            return -1;
        const unsigned char *d = body + r.pos;
        PUTL(o, "DuplicateIDEncoding [address=");
        if (put_utf16(o, a, an, 0) < 0)
            return -1;
        PUTL(o, ", duplID=");
        put_hex(o, d, (size_t)n, 0);
        static const unsigned char BRIDGE[] = {'B', 0, 'R', 0, 'I', 0, 'D', 0, 'G', 0, 'E', 0};
        if (an >= 12 && memcmp(a, BRIDGE, 12) == 0 && n == 24) {
            PUTL(o, " / nodeUUID=");
            put_uuid(o, d);
            PUTL(o, " messageID=");
            put_int(o, be64(d + 16));
        }
        PUTL(o, "]");
        return 0;
    }
    case 39:
    case 42: {
        int64_t q = r_i64(&r), page = r_i64(&r);
        int32_t m = r_i32(&r);
        if (r.bad)
            return -1;
        put_int1(o, utype == 39 ? "CursorAckRecordEncoding [queueID=" : "PGComplete [queueID=", q, ", position=");
        put_position(o, page, m);
        PUTL(o, "]");
        return 0;
    }
    case 40:
    case 41: {
        int64_t q = r_i64(&r);
        int64_t v = utype == 40 ? r_i64(&r) : r_i32(&r);
        int64_t ps = 0;
        if (!r.bad && r.end - r.pos > 0)
            ps = r_i64(&r);
        if (r.bad)
            return -1;
        put_int3(o, utype == 40 ? "PageCountRecord [queueID=" : "PageCountRecordInc [queueID=", q, ", value=", v,
                 ", persistentSize=", ps, "]");
        return 0;
    }
    case 43: {
        int64_t q = r_i64(&r), p = r_i64(&r);
        if (r.bad)
            return -1;
        put_int2(o, "PageCountPendingImpl [queueID=", q, ", pageID=", p, "]");
        return 0;
    }
    case 24: {
        int64_t v = r_i64(&r);
        if (r.bad)
            return -1;
        put_int1(o, "IDCounterEncoding [id=", v, "]");
        return 0;
    }
    case 29: {
        int64_t v = r_i64(&r);
        if (r.bad)
            return -1;
        put_int1(o, "PendingLargeMessageEncoding::MessageID=", v, "");
        return 0;
    }
    case 22:
    case 46: {
        int64_t q = r_i64(&r);
        int s = r_i16(&r);
        if (r.bad)
            return -1;
        const char *name = s == 0 ? "PAUSED" : s == 1 ? "RUNNING" : "null";
        if (utype == 22) {
            put_int2(o, "QueueStatusEncoding [id=", rid, ", queueID=", q, ", status=");
            puts_(o, name);
            PUTL(o, "]");
        } else {
            PUTL(o, "AddressStatusEncoding{status=");
            puts_(o, name);
            put_int1(o, ", id=", q, "}");
        }
        return 0;
    }
    case 28:
        put_int1(o, "PersistedBridgeConfiguration(<", len, " bytes not decoded>)");
        return 0;
    case 31:
        PUTL(o, "ADD-MESSAGE is not supported any longer, use export/import");
        return 0;
    case 49:
    case 51:
        PUTL(o, "** null **");
        return 0;
    case 45:
        if (len >= 1 && body[0] == 1) {
            r.pos = 1;
            return describe_core(o, &r, safe, 0);
        }
        return -1;
    default:
        if (utype < 20 || utype > 53 || utype == 23) { /* not decoded by DescribeJournal */
            PUTL(o, "** null **");
            return 0;
        }
        return -1;
    }
}

/* "recordID=..;userRecordType=..;isUpdate=..;compactCount=..;": what every body-carrying line (and a
 * DeleteRecordTX line) of describe._file_lines and describe._surviving_lines holds before the <obj>. */
static void put_record_head(outbuf *o, long long rid, long long utype, int is_update, long long compact_count) {
    put_int2(o, "recordID=", rid, ";userRecordType=", utype, ";isUpdate=");
    put_bool(o, is_update);
    put_int1(o, ";compactCount=", compact_count, ";");
}

/* describe_obj with rollback: 1 written, 0 Python's. */
static int obj_or_rollback(outbuf *o, int utype, const unsigned char *body, Py_ssize_t len, int64_t rid,
                           int is_update, int safe) {
    size_t mark = o->n;
    if (describe_obj(o, utype, body, len, rid, is_update, safe) < 0) {
        if (!o->nomem)
            o->n = mark;
        return 0;
    }
    return 1;
}

static PyObject *take_text(outbuf *o) {
    if (o->nomem) {
        PyMem_RawFree(o->p);
        o->p = NULL;
        o->n = o->cap = 0;
        return PyErr_NoMemory();
    }
    PyObject *s = PyUnicode_DecodeUTF8(o->p ? o->p : "", (Py_ssize_t)o->n, "strict");
    PyMem_RawFree(o->p);
    o->p = NULL;
    o->n = o->cap = 0;
    return s;
}

PyObject *amq_describe_body(PyObject *self, PyObject *args) {
    int utype, is_update, safe;
    long long rid;
    Py_buffer body;
    if (!PyArg_ParseTuple(args, "iy*Lpp:describe_body", &utype, &body, &rid, &is_update, &safe))
        return NULL;
    outbuf o = {0};
    int ok = obj_or_rollback(&o, utype, body.buf, body.len, rid, is_update, safe);
    PyBuffer_Release(&body);
    if (!ok && !o.nomem) {
        PyMem_RawFree(o.p);
        Py_RETURN_NONE;
    }
    return take_text(&o);
}

/* ---- one file's records: describe._file_lines ---- */

enum { EVENT = 10, ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE_TX, DELETE, PREPARE, COMMIT, ROLLBACK };
static const int FIXED_V2[] = {23, 23, 23, 31, 31, 30, 18, 26, 22, 18}; /* records._FIXED_V2 from EVENT */

static int flush_run(outbuf *o, PyObject *out) {
    if (o->n == 0)
        return 0;
    o->n--; /* the last line's "\n": write_lines adds it */
    PyObject *s = take_text(o);
    if (s == NULL)
        return -1;
    int rc = PyList_Append(out, s);
    Py_DECREF(s);
    return rc;
}

static inline int tuple_ll(PyObject *t, Py_ssize_t i, long long *v) {
    *v = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
    return (*v == -1 && PyErr_Occurred()) ? -1 : 0;
}

PyObject *amq_describe_lines(PyObject *self, PyObject *args) {
    Py_buffer data;
    int version, safe;
    PyObject *records;
    if (!PyArg_ParseTuple(args, "y*iO!p:describe_lines", &data, &version, &PyList_Type, &records, &safe))
        return NULL;
    const unsigned char *buf = data.buf;
    Py_ssize_t size = data.len;
    PyObject *out = PyList_New(0);
    outbuf o = {0};
    if (out == NULL)
        goto fail;
    Py_ssize_t n = PyList_GET_SIZE(records);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(records, i);
        long long f[10];
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 10) {
            PyErr_SetString(PyExc_TypeError, "describe_lines: records must be scan_records tuples");
            goto fail;
        }
        for (int k = 0; k < 10; k++)
            if (tuple_ll(t, k, &f[k]) < 0)
                goto fail;
        long long rt = f[0], off = f[1], cc = f[3], tx = f[4], rid = f[5], utype = f[6], blen = f[7], nrec = f[8];
        size_t mark = o.n;
        int done = 0;
        if (rt >= EVENT && rt <= ROLLBACK && rt != PREPARE) {
            long long start = off + FIXED_V2[rt - EVENT] - (version >= 2 ? 0 : 1) - 4;
            int has_body = rt <= UPDATE_TX;
            int counter = (rt == UPDATE || rt == UPDATE_TX) && (utype == 40 || utype == 41);
            if (has_body && (start < 0 || blen < 0 || start + blen > size || counter)) {
                done = 0; /* slices Python would clamp, or counter lines with print state: Python's */
            } else {
                done = 1;
                switch (rt) {
                case ADD: PUTL(&o, "operation@AddRecord;"); break;
                case UPDATE: PUTL(&o, "operation@Update;"); break;
                case EVENT: PUTL(&o, "operation@Event;"); break;
                case ADD_TX: put_int1(&o, "operation@AddRecordTX;txID=", tx, ","); break;
                case UPDATE_TX: put_int1(&o, "operation@UpdateTX;txID=", tx, ","); break;
                case DELETE_TX:
                    put_int1(&o, "operation@DeleteRecordTX;txID=", tx, ",");
                    put_record_head(&o, rid, 0, 1, cc);
                    PUTL(&o, "** null **");
                    break;
                case DELETE: put_int1(&o, "operation@DeleteRecord;recordID=", rid, ""); break;
                case COMMIT: put_int2(&o, "operation@Commit;txID=", tx, ",numberOfRecords=", nrec, ""); break;
                case ROLLBACK: put_int1(&o, "operation@Rollback;txID=", tx, ""); break;
                }
                if (has_body) {
                    int upd = rt == UPDATE || rt == UPDATE_TX;
                    put_record_head(&o, rid, utype, upd, cc);
                    done = obj_or_rollback(&o, (int)utype, buf + start, (Py_ssize_t)blen, rid, upd, safe);
                }
            }
        }
        if (o.nomem) {
            PyErr_NoMemory();
            goto fail;
        }
        if (done) {
            PUTL(&o, "\n");
        } else {
            o.n = mark;
            if (flush_run(&o, out) < 0)
                goto fail;
            PyObject *ix = PyLong_FromSsize_t(i);
            if (ix == NULL || PyList_Append(out, ix) < 0) {
                Py_XDECREF(ix);
                goto fail;
            }
            Py_DECREF(ix);
        }
        if (o.n >= (1u << 20) && flush_run(&o, out) < 0) /* bound the text held at once */
            goto fail;
    }
    if (flush_run(&o, out) < 0)
        goto fail;
    PyBuffer_Release(&data);
    return out;
fail:
    PyMem_RawFree(o.p);
    Py_XDECREF(out);
    PyBuffer_Release(&data);
    return NULL;
}

/* ---- the surviving records: describe._surviving_lines ---- */


/* describe_live(live, start, stop, data, file_index, safe, ref_counts)
 *   -> (text, next, messages, large_messages)
 * The "recordID=...;<obj>" lines of live entries start.. while they are in file `file_index` (bytes `data`),
 * stopping at `stop`, at an entry of another file, or at one C leaves to Python (page counters, which print
 * state, and bodies it does not cover): `next` is that entry. Tallies what _surviving_lines tallies for the
 * entries written: messages (31, 45), large messages (30) and, in `ref_counts` (a dict, first-put order),
 * +1 per ADD_REF and -1 per ACKNOWLEDGE_REF of a queue already seen (0 for an unseen one). */
PyObject *amq_describe_live(PyObject *self, PyObject *args) {
    Py_buffer live, data;
    Py_ssize_t start, stop;
    int file_index, safe;
    PyObject *refs;
    long long wbase = 0, fsize = -1;
    if (!PyArg_ParseTuple(args, "y*nny*ipO!|LL:describe_live", &live, &start, &stop, &data, &file_index, &safe,
                          &PyDict_Type, &refs, &wbase, &fsize))
        return NULL;
    PyObject *result = NULL;
    outbuf o = {0};
    long long messages = 0, large = 0;
    Py_ssize_t i = start;
    if (!live_range_ok(live.len, start, stop, "describe_live"))
        goto done;
    const unsigned char *lb = live.buf, *db = data.buf;
    Py_ssize_t dlen = data.len;
    for (; i < stop; i++) {
        int64_t id, off;
        int32_t blen;
        const unsigned char *e = live_entry_of_file(lb, i, file_index, &id, &off, &blen);
        if (e == NULL)
            break;
        int utype = e[8], upd = e[9] != 0, cc = (int8_t)e[10];
        if (utype == 40 || utype == 41)
            break;
        /* the bytes LoadResult.body() reads: fewer if the file is shorter */
        Py_ssize_t bs, be;
        if (!body_in_window(off, blen, wbase, dlen, fsize, &bs, &be))
            break;
        size_t mark = o.n;
        put_record_head(&o, id, utype, upd, cc);
        if (!obj_or_rollback(&o, utype, db + bs, be - bs, id, upd, safe)) {
            if (o.nomem)
                break;
            o.n = mark;
            break;
        }
        PUTL(&o, "\n");
        if (o.nomem)
            break;
        if (utype == 45 || utype == 31) {
            messages++;
        } else if (utype == 30) {
            large++;
        } else if ((utype == 32 || utype == 33) && be - bs >= 8) {
            PyObject *q = PyLong_FromLongLong(be64(db + bs));
            if (q == NULL)
                goto done;
            PyObject *cur = PyDict_GetItemWithError(refs, q);
            long long v;
            int put_it = 1;
            if (cur == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(q);
                    goto done;
                }
                v = utype == 32 ? 1 : 0;
            } else {
                v = PyLong_AsLongLong(cur) + (utype == 32 ? 1 : -1);
                if (v == -1 && PyErr_Occurred()) {
                    Py_DECREF(q);
                    goto done;
                }
            }
            if (put_it) {
                PyObject *nv = PyLong_FromLongLong(v);
                int rc = nv == NULL ? -1 : PyDict_SetItem(refs, q, nv);
                Py_XDECREF(nv);
                if (rc < 0) {
                    Py_DECREF(q);
                    goto done;
                }
            }
            Py_DECREF(q);
        }
        if (o.n >= (1u << 20)) { /* bound the text held at once */
            i++;
            break;
        }
    }
    if (o.nomem) {
        PyErr_NoMemory();
        goto done;
    }
    if (o.n)
        o.n--; /* the last "\n": the caller's writer adds it */
    PyObject *text = take_text(&o);
    if (text != NULL)
        result = Py_BuildValue("(NnLL)", text, i, messages, large);
done:
    PyMem_RawFree(o.p);
    PyBuffer_Release(&live);
    PyBuffer_Release(&data);
    return result;
}

/* ---- paged messages: paging.message_line's message part ---- */

/* describe_paged(buf, start, end, safe) -> (transaction_id, queue_ids, text) or None
 * One page record (the PagedMessage filling buf[start:end]) when it holds a core message (persister 1, no
 * large-message header): `text` is what message_line writes after "pg=.., msg=..,pgTX=.." and before
 * ",Queues = ". None for everything else, including bytes PagedMessage.read would refuse: the caller then
 * decodes in Python (which raises where it must). */
PyObject *amq_describe_paged(PyObject *self, PyObject *args) {
    Py_buffer b;
    Py_ssize_t start, end;
    int safe;
    if (!PyArg_ParseTuple(args, "y*nnp:describe_paged", &b, &start, &end, &safe))
        return NULL;
    PyObject *result = NULL;
    outbuf o = {0};
    if (start < 0 || end > b.len || start > end) {
        PyErr_SetString(PyExc_IndexError, "describe_paged range out of bounds");
        goto done;
    }
    rd r = {b.buf, start, end, 0};
    int64_t tx = r_i64(&r);
    int ltype = r_i8(&r);
    if (r.bad || ltype == 1 || ltype == -1 || r.pos >= r.end || r.p[r.pos] != 1)
        goto none;
    r.pos++;
    if (describe_core(&o, &r, safe, 1) < 0 || r.bad)
        goto none_or_nomem;
    int32_t n = r_i32(&r);
    if (r.bad || n < 0 || (int64_t)n * 8 > (int64_t)(r.end - r.pos))
        goto none;
    if (o.nomem) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *qs = PyTuple_New(n);
    if (qs == NULL)
        goto done;
    for (int32_t i = 0; i < n; i++) {
        PyObject *q = PyLong_FromLongLong(be64(r.p + r.pos + 8 * (Py_ssize_t)i));
        if (q == NULL) {
            Py_DECREF(qs);
            goto done;
        }
        PyTuple_SET_ITEM(qs, i, q);
    }
    PyObject *text = take_text(&o);
    if (text == NULL) {
        Py_DECREF(qs);
        goto done;
    }
    result = Py_BuildValue("(LNN)", (long long)tx, qs, text);
    goto done;
none_or_nomem:
    if (o.nomem) {
        PyErr_NoMemory();
        goto done;
    }
none:
    result = Py_NewRef(Py_None);
done:
    PyMem_RawFree(o.p);
    PyBuffer_Release(&b);
    return result;
}
