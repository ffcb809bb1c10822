/* Timed write loops of `amqtool bench`, one per Artemis journal type plus io_uring.
 *
 * Python prepares the file (pre-filled with zeros as JournalFilesRepository does, §1.3) and reads the
 * results; everything between the first and the last timestamp runs here with the GIL released, so no
 * interpreter work lands in a measured interval.  Times are CLOCK_MONOTONIC nanoseconds.
 *
 * Common shape of every loop:
 *   - `block` is what one journal write carries; `unit` is the bytes one write puts on disk: the block
 *     itself (NIO, MAPPED) or the block padded with zeros to `align` under O_DIRECT, as Artemis' AIO
 *     buffers are (§1.3 "each flush of the timed buffer is padded with zeros up to the alignment").
 *   - writes land on slots 0, 1, 2, ... of size `unit` inside the first `region` bytes, wrapping to slot 0
 *     when the next group no longer fits: the bytes after the last whole slot are never written.
 *   - the loop stops after `writes` writes, after `duration_ns` (when > 0), or when Python sets ctl[1];
 *     it publishes its progress (writes done) in ctl[0].  ctl is any writable buffer of two int64.
 *   - it returns (writes_done, elapsed_ns, latencies) where latencies is the bytes of a native uint64
 *     array: one entry per sync (NIO, MAPPED) or per completed write (AIO, io_uring).  NIO and MAPPED
 *     with sync_lat=True add a fourth item: the same count of entries timing the sync call alone
 *     (fdatasync/fsync/msync), which is what fio reports as its "sync" latency.
 */
#define _GNU_SOURCE
#include "amqnative.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- shared plumbing --------------------------------------------------------------------------- */

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct {
    uint64_t *v;
    size_t n, cap;
} lat_t;

static int lat_push(lat_t *l, uint64_t x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        uint64_t *v = realloc(l->v, cap * sizeof(uint64_t));
        if (v == NULL)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

typedef struct {
    int err;          /* errno of the first failure, 0 when none */
    const char *what; /* which step failed */
} fail_t;

#define FAIL(f, e, w)        \
    do {                     \
        (f)->err = (e);      \
        (f)->what = (w);     \
    } while (0)

typedef struct {
    int64_t *ctl; /* NULL or [done, stop] */
} ctl_t;

static inline int stop_requested(ctl_t *c) { return c->ctl && __atomic_load_n(&c->ctl[1], __ATOMIC_RELAXED); }
static inline void publish(ctl_t *c, uint64_t done) {
    if (c->ctl)
        __atomic_store_n(&c->ctl[0], (int64_t)done, __ATOMIC_RELAXED);
}

static int get_ctl(PyObject *obj, Py_buffer *view, ctl_t *c) {
    c->ctl = NULL;
    view->obj = NULL;
    if (obj == NULL || obj == Py_None)
        return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        view->obj = NULL;
        return -1;
    }
    if (view->len < 16) {
        PyBuffer_Release(view);
        view->obj = NULL;
        PyErr_SetString(PyExc_ValueError, "ctl must be a writable buffer of at least 16 bytes");
        return -1;
    }
    c->ctl = (int64_t *)view->buf;
    return 0;
}

static size_t round_up(size_t x, size_t a) { return a ? (x + a - 1) / a * a : x; }

/* An aligned buffer holding `count` copies of the block, each followed by zeros up to `unit`. */
static unsigned char *make_units(const Py_buffer *block, size_t unit, size_t count, size_t align) {
    void *p = NULL;
    size_t total = unit * count;
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (posix_memalign(&p, align, round_up(total ? total : 1, align)) != 0)
        return NULL;
    memset(p, 0, round_up(total ? total : 1, align));
    for (size_t i = 0; i < count; i++)
        memcpy((unsigned char *)p + i * unit, block->buf, (size_t)block->len);
    return p;
}

static int pwrite_full(int fd, const unsigned char *p, size_t len, off_t off) {
    while (len) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

static PyObject *lat_bytes(const lat_t *lat) {
    return PyBytes_FromStringAndSize(lat->v ? (const char *)lat->v : "", (Py_ssize_t)(lat->n * sizeof(uint64_t)));
}

/* Build (done, elapsed, latencies[, sync_latencies]) or raise OSError(errno, "<step>: <strerror>", path).
 * Frees both arrays; `slat` NULL means no fourth item. */
static PyObject *finish2(fail_t *f, PyObject *path, uint64_t done, uint64_t elapsed, lat_t *lat, lat_t *slat) {
    PyObject *res = NULL;
    if (f->err) {
        PyObject *msg = PyUnicode_FromFormat("%s: %s", f->what, strerror(f->err));
        if (msg) {
            PyObject *exc = PyObject_CallFunction(PyExc_OSError, "iOO", f->err, msg, path);
            if (exc) {
                PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
                Py_DECREF(exc);
            }
            Py_DECREF(msg);
        }
    } else {
        PyObject *a = lat_bytes(lat), *b = slat ? lat_bytes(slat) : NULL;
        if (a && (b || !slat))
            res = slat ? Py_BuildValue("(KKOO)", (unsigned long long)done, (unsigned long long)elapsed, a, b)
                       : Py_BuildValue("(KKO)", (unsigned long long)done, (unsigned long long)elapsed, a);
        Py_XDECREF(a);
        Py_XDECREF(b);
    }
    free(lat->v);
    if (slat)
        free(slat->v);
    return res;
}

/* Build (done, elapsed, latencies) or raise OSError(errno, "<step>: <strerror>", path). */
static PyObject *finish(fail_t *f, PyObject *path, uint64_t done, uint64_t elapsed, lat_t *lat) {
    return finish2(f, path, done, elapsed, lat, NULL);
}

/* Releases what every *_run took from its arguments (the ctl view, when get_ctl took one; the block; the path)
 * and returns res. */
static PyObject *release_args(PyObject *res, PyObject *path, Py_buffer *block, Py_buffer *ctlview) {
    if (ctlview->obj)
        PyBuffer_Release(ctlview);
    PyBuffer_Release(block);
    Py_DECREF(path);
    return res;
}

static int check_geometry(size_t block_len, size_t unit, unsigned long long region, size_t group) {
    if (block_len == 0) {
        PyErr_SetString(PyExc_ValueError, "block must not be empty");
        return -1;
    }
    if (unit * group > region) {
        PyErr_Format(PyExc_ValueError, "region of %llu bytes holds no group of %zu writes of %zu bytes", region,
                     group, unit);
        return -1;
    }
    return 0;
}

/* The arguments of the O_DIRECT loops (ASYNCIO, io_uring): depth 1..max_depth, align a power of two >= 512,
 * one write of the block padded to `align` (*unit) fitting the region.  0, or -1 with ValueError raised. */
static int check_direct(const Py_buffer *block, unsigned long long region, int depth, int max_depth, int align,
                        size_t *unit) {
    if (depth < 1 || depth > max_depth || align < 512 || (align & (align - 1))) {
        PyErr_Format(PyExc_ValueError, "depth must be 1..%d and align a power of two >= 512", max_depth);
        return -1;
    }
    *unit = round_up((size_t)block->len, (size_t)align);
    return check_geometry((size_t)block->len, *unit, region, 1);
}

/* ---- the batched loop of NIO and MAPPED ---------------------------------------------------------- */

typedef struct {
    unsigned char *map;       /* MAPPED: the mapping of the first `region` bytes; NIO: NULL */
    int fd;                   /* NIO: the open file */
    int coalesce, sync;       /* NIO: one pwrite per group or one per record; sync 0 none, 1 fdatasync, 2 fsync */
    const unsigned char *src; /* `batch` units, each the block followed by zeros up to `unit` */
    size_t unit, region;
} group_io;

/* The n records of a group onto slots slot.. : NIO by pwrite, MAPPED by memcpy into the mapping.
 * 0, or -1 with f set. */
static int group_write(const group_io *g, size_t slot, size_t n, fail_t *f) {
    if (g->map) {
        memcpy(g->map + slot * g->unit, g->src, n * g->unit);
        return 0;
    }
    int rc = 0;
    if (g->coalesce) {
        rc = pwrite_full(g->fd, g->src, n * g->unit, (off_t)(slot * g->unit));
    } else {
        for (size_t j = 0; j < n && rc == 0; j++)
            rc = pwrite_full(g->fd, g->src + j * g->unit, g->unit, (off_t)((slot + j) * g->unit));
    }
    if (rc < 0) {
        FAIL(f, errno, "pwrite");
        return -1;
    }
    return 0;
}

/* The one sync after a group: NIO fdatasync or fsync (or none), MAPPED msync(MS_SYNC) of the whole mapping.
 * 0, or -1 with f set. */
static int group_sync(const group_io *g, fail_t *f) {
    if (g->map) {
        if (msync(g->map, g->region, MS_SYNC) < 0) {
            FAIL(f, errno, "msync");
            return -1;
        }
        return 0;
    }
    if (g->sync == 1 && fdatasync(g->fd) < 0) {
        FAIL(f, errno, "fdatasync");
        return -1;
    }
    if (g->sync == 2 && fsync(g->fd) < 0) {
        FAIL(f, errno, "fsync");
        return -1;
    }
    return 0;
}

/* The timed loop of NIO and MAPPED (see the top of the file): groups of up to `batch` records, each written
 * then synced once; one latency per group (write + sync) into lat and, when slat is not NULL, one per sync
 * alone into slat.  Sets *t0 and *tlast, returns the writes done. */
static uint64_t group_loop(const group_io *g, ctl_t *c, unsigned long long writes, size_t batch, size_t nslots,
                           unsigned long long duration, lat_t *lat, lat_t *slat, fail_t *f, uint64_t *t0,
                           uint64_t *tlast) {
    uint64_t done = 0;
    size_t slot = 0;
    *t0 = *tlast = now_ns();
    while (done < writes && !stop_requested(c)) {
        if (duration && *tlast - *t0 >= duration)
            break;
        size_t n = batch;
        if (writes - done < n)
            n = (size_t)(writes - done);
        if (slot + n > nslots)
            slot = 0;
        uint64_t ts = now_ns();
        if (group_write(g, slot, n, f) < 0)
            break;
        uint64_t tw = slat ? now_ns() : 0;
        if (group_sync(g, f) < 0)
            break;
        *tlast = now_ns();
        if (lat_push(lat, *tlast - ts) < 0 || (slat && lat_push(slat, *tlast - tw) < 0)) {
            FAIL(f, ENOMEM, "latency buffer");
            break;
        }
        slot += n;
        done += n;
        publish(c, done);
    }
    return done;
}

/* ---- NIO: pwrite + fdatasync / fsync ----------------------------------------------------------- */
/* NIOSequentialFile writes through a FileChannel and syncs with force(false) = fdatasync when
 * journal-datasync is on.  batch > 1 models the TimedBuffer: `batch` records reach the file in one
 * write (coalesce) or in `batch` writes, then one sync covers them all.  sync: 0 none, 1 fdatasync,
 * 2 fsync.  oflags adds open flags (O_DSYNC, O_SYNC, O_DIRECT) for `bench sync-methods`. */

PyObject *amq_nio_run(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"path", "block", "region", "writes", "batch", "coalesce", "sync", "oflags",
                             "align", "duration_ns", "ctl", "sync_lat", NULL};
    PyObject *path = NULL, *ctlobj = NULL;
    Py_buffer block, ctlview;
    unsigned long long region, writes, duration = 0;
    int batch = 1, coalesce = 1, sync = 1, oflags = 0, align = 4096, want_slat = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&y*KK|ipiiiKOp:nio_run", kwlist, PyUnicode_FSConverter,
                                     &path, &block, &region, &writes, &batch, &coalesce, &sync, &oflags, &align,
                                     &duration, &ctlobj, &want_slat))
        return NULL;
    ctl_t c;
    PyObject *res = NULL;
    if (get_ctl(ctlobj, &ctlview, &c) < 0)
        goto out;
    if (batch < 1 || align < 1 || sync < 0 || sync > 2) {
        PyErr_SetString(PyExc_ValueError, "batch and align must be >= 1, sync 0..2");
        goto out;
    }
    size_t unit = (oflags & O_DIRECT) ? round_up((size_t)block.len, (size_t)align) : (size_t)block.len;
    if (check_geometry((size_t)block.len, unit, region, (size_t)batch) < 0)
        goto out;
    unsigned char *buf = make_units(&block, unit, (size_t)batch, (size_t)align);
    if (buf == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    const char *cpath = PyBytes_AS_STRING(path);
    size_t nslots = region / unit;
    fail_t f = {0, NULL};
    lat_t lat = {NULL, 0, 0}, slat = {NULL, 0, 0};
    uint64_t done = 0, t0 = 0, tlast = 0;

    Py_BEGIN_ALLOW_THREADS
    int fd = open(cpath, O_RDWR | O_CLOEXEC | oflags);
    if (fd < 0) {
        FAIL(&f, errno, (oflags & O_DIRECT) ? "open with O_DIRECT" : "open");
    } else {
        group_io g = {NULL, fd, coalesce, sync, buf, unit, (size_t)region};
        done = group_loop(&g, &c, writes, (size_t)batch, nslots, duration, &lat, want_slat ? &slat : NULL, &f, &t0,
                          &tlast);
        close(fd);
    }
    Py_END_ALLOW_THREADS

    free(buf);
    res = finish2(&f, path, done, tlast - t0, &lat, want_slat ? &slat : NULL);
out:
    return release_args(res, path, &block, &ctlview);
}

/* ---- ASYNCIO: O_DIRECT + Linux AIO through the raw system calls ------------------------------- */
/* AIOSequentialFile / LibaioContext: the file is opened with O_DIRECT, writes are io_submit'ed pwrites of
 * aligned buffers, and durability comes from their completion (no fdatasync on the write path).  Up to
 * `depth` writes are in flight, as journal-max-io allows; latency runs from io_submit to the event.
 * As LibaioContext does, every write is its own io_submit(ctx, 1, &iocb) (the native submit() helper)
 * and completions are reaped in batches, io_getevents(ctx, 1, max) (LibaioContext.poll); fio's libaio
 * engine with iodepth_batch_submit=1, iodepth_batch_complete_min=1, iodepth_batch_complete_max=depth
 * issues the same calls. */

static long sys_io_setup(unsigned nr, aio_context_t *ctx) { return syscall(SYS_io_setup, nr, ctx); }
static long sys_io_destroy(aio_context_t ctx) { return syscall(SYS_io_destroy, ctx); }
static long sys_io_submit(aio_context_t ctx, long n, struct iocb **iocbs) {
    return syscall(SYS_io_submit, ctx, n, iocbs);
}
static long sys_io_getevents(aio_context_t ctx, long min, long max, struct io_event *ev, struct timespec *t) {
    return syscall(SYS_io_getevents, ctx, min, max, ev, t);
}

PyObject *amq_aio_probe(PyObject *self, PyObject *noargs) {
    aio_context_t ctx = 0;
    if (sys_io_setup(1, &ctx) < 0)
        return Py_BuildValue("(Os)", Py_False, strerror(errno));
    sys_io_destroy(ctx);
    return Py_BuildValue("(Os)", Py_True, "");
}

PyObject *amq_aio_run(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"path", "block", "region", "writes", "depth", "align", "duration_ns", "ctl", NULL};
    PyObject *path = NULL, *ctlobj = NULL;
    Py_buffer block, ctlview;
    unsigned long long region, writes, duration = 0;
    int depth = 1, align = 4096;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&y*KK|iiKO:aio_run", kwlist, PyUnicode_FSConverter, &path,
                                     &block, &region, &writes, &depth, &align, &duration, &ctlobj))
        return NULL;
    ctl_t c;
    PyObject *res = NULL;
    if (get_ctl(ctlobj, &ctlview, &c) < 0)
        goto out;
    size_t unit;
    if (check_direct(&block, region, depth, 65536, align, &unit) < 0)
        goto out;
    unsigned char *buf = make_units(&block, unit, 1, (size_t)align);
    struct iocb *cbs = calloc((size_t)depth, sizeof(struct iocb));
    struct iocb **ptrs = calloc((size_t)depth, sizeof(struct iocb *));
    struct io_event *events = calloc((size_t)depth, sizeof(struct io_event));
    uint64_t *sent = calloc((size_t)depth, sizeof(uint64_t));
    int *freelist = calloc((size_t)depth, sizeof(int));
    if (!buf || !cbs || !ptrs || !events || !sent || !freelist) {
        PyErr_NoMemory();
        goto out_free;
    }
    const char *cpath = PyBytes_AS_STRING(path);
    size_t nslots = region / unit;
    fail_t f = {0, NULL};
    lat_t lat = {NULL, 0, 0};
    uint64_t done = 0, t0 = 0, tlast = 0;

    Py_BEGIN_ALLOW_THREADS
    aio_context_t ctx = 0;
    int fd = open(cpath, O_RDWR | O_CLOEXEC | O_DIRECT);
    if (fd < 0) {
        FAIL(&f, errno, "open with O_DIRECT");
    } else if (sys_io_setup((unsigned)depth, &ctx) < 0) {
        FAIL(&f, errno, "io_setup");
        close(fd);
    } else {
        int nfree = depth, inflight = 0;
        for (int i = 0; i < depth; i++)
            freelist[i] = depth - 1 - i;
        uint64_t submitted = 0;
        size_t slot = 0;
        int stopping = 0;
        t0 = tlast = now_ns();
        while (!f.err) {
            if (!stopping && (stop_requested(&c) || (duration && tlast - t0 >= duration)))
                stopping = 1;
            int n = 0;
            while (!stopping && nfree > 0 && submitted + (uint64_t)n < writes) {
                int idx = freelist[--nfree];
                struct iocb *cb = &cbs[idx];
                memset(cb, 0, sizeof(*cb));
                cb->aio_lio_opcode = IOCB_CMD_PWRITE;
                cb->aio_fildes = (uint32_t)fd;
                cb->aio_buf = (uint64_t)(uintptr_t)buf;
                cb->aio_nbytes = unit;
                if (slot >= nslots)
                    slot = 0;
                cb->aio_offset = (int64_t)(slot * unit);
                cb->aio_data = (uint64_t)idx;
                slot++;
                ptrs[n++] = cb;
            }
            if (n > 0) {
                int off = 0;
                while (off < n) {
                    sent[ptrs[off]->aio_data] = now_ns();
                    long r = sys_io_submit(ctx, 1, ptrs + off);
                    if (r < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                            continue;
                        FAIL(&f, errno, "io_submit");
                        break;
                    }
                    off += (int)r;
                }
                /* what was not submitted goes back to the free list */
                for (int i = off; i < n; i++)
                    freelist[nfree++] = (int)ptrs[i]->aio_data;
                submitted += (uint64_t)off;
                inflight += off;
            }
            if (inflight == 0)
                break;
            long got = sys_io_getevents(ctx, 1, depth, events, NULL);
            if (got < 0) {
                if (errno == EINTR)
                    continue;
                FAIL(&f, errno, "io_getevents");
                break;
            }
            uint64_t te = now_ns();
            for (long i = 0; i < got; i++) {
                int idx = (int)events[i].data;
                freelist[nfree++] = idx;
                inflight--;
                if (events[i].res < 0) {
                    if (!f.err)
                        FAIL(&f, (int)-events[i].res, "AIO write");
                } else if ((size_t)events[i].res != unit) {
                    if (!f.err)
                        FAIL(&f, EIO, "short AIO write");
                } else {
                    if (lat_push(&lat, te - sent[idx]) < 0 && !f.err)
                        FAIL(&f, ENOMEM, "latency buffer");
                    done++;
                }
            }
            tlast = te;
            publish(&c, done);
            if (f.err)
                break;
        }
        sys_io_destroy(ctx); /* waits for whatever is still in flight */
        close(fd);
    }
    Py_END_ALLOW_THREADS

    res = finish(&f, path, done, tlast - t0, &lat);
out_free:
    free(buf);
    free(cbs);
    free(ptrs);
    free(events);
    free(sent);
    free(freelist);
out:
    return release_args(res, path, &block, &ctlview);
}

/* ---- MAPPED: memcpy into MAP_SHARED + msync(MS_SYNC) ------------------------------------------ */
/* MappedSequentialFile maps the whole pre-filled file (MappedFile.of: channel.map over the file's size)
 * and syncs with MappedFile.force() = MappedByteBuffer.force(), i.e. msync(MS_SYNC) over the WHOLE
 * mapping, not just the pages written since the last sync; fio's mmap engine with fdatasync=1 does the
 * same.  batch > 1: `batch` records copied, then one msync. */

PyObject *amq_mapped_run(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"path", "block", "region", "writes", "batch", "duration_ns", "ctl", "sync_lat", NULL};
    PyObject *path = NULL, *ctlobj = NULL;
    Py_buffer block, ctlview;
    unsigned long long region, writes, duration = 0;
    int batch = 1, want_slat = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&y*KK|iKOp:mapped_run", kwlist, PyUnicode_FSConverter,
                                     &path, &block, &region, &writes, &batch, &duration, &ctlobj, &want_slat))
        return NULL;
    ctl_t c;
    PyObject *res = NULL;
    if (get_ctl(ctlobj, &ctlview, &c) < 0)
        goto out;
    if (batch < 1) {
        PyErr_SetString(PyExc_ValueError, "batch must be >= 1");
        goto out;
    }
    size_t unit = (size_t)block.len;
    if (check_geometry(unit, unit, region, (size_t)batch) < 0)
        goto out;
    unsigned char *src = make_units(&block, unit, (size_t)batch, 64);
    if (src == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    const char *cpath = PyBytes_AS_STRING(path);
    size_t nslots = (size_t)(region / unit);
    fail_t f = {0, NULL};
    lat_t lat = {NULL, 0, 0}, slat = {NULL, 0, 0};
    uint64_t done = 0, t0 = 0, tlast = 0;

    Py_BEGIN_ALLOW_THREADS
    int fd = open(cpath, O_RDWR | O_CLOEXEC);
    unsigned char *map = MAP_FAILED;
    if (fd < 0) {
        FAIL(&f, errno, "open");
    } else if ((map = mmap(NULL, (size_t)region, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        FAIL(&f, errno, "mmap");
    } else {
        group_io g = {map, fd, 0, 0, src, unit, (size_t)region};
        done = group_loop(&g, &c, writes, (size_t)batch, nslots, duration, &lat, want_slat ? &slat : NULL, &f, &t0,
                          &tlast);
    }
    if (map != MAP_FAILED)
        munmap(map, (size_t)region);
    if (fd >= 0)
        close(fd);
    Py_END_ALLOW_THREADS

    free(src);
    res = finish2(&f, path, done, tlast - t0, &lat, want_slat ? &slat : NULL);
out:
    return release_args(res, path, &block, &ctlview);
}

/* ---- io_uring through io_uring_setup / io_uring_enter ----------------------------------------- */
/* Not an Artemis journal type: the fourth line of the table, for comparison with ASYNCIO.  O_DIRECT
 * IORING_OP_WRITE of aligned buffers, `depth` in flight; with sync=1 each write is linked
 * (IOSQE_IO_LINK) to an IORING_OP_FSYNC with IORING_FSYNC_DATASYNC and its latency ends with the sync.
 * Same shape as the ASYNCIO loop, so the two lines differ only in the kernel interface: every write is
 * submitted by its own io_uring_enter(1, 0, 0) and completions are reaped in batches after waiting for
 * at least one (fio: ioengine=io_uring iodepth_batch_submit=1 iodepth_batch_complete_min=1).  Submitting
 * all free slots in one enter instead lets the block layer merge the sequential 4 KiB writes of one
 * batch into one large request, which measures something else. */

typedef struct {
    int fd;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
    void *sq_ptr, *cq_ptr;
    size_t sq_sz, cq_sz, sqes_sz;
    unsigned sq_entries;
} ring_t;

static int ring_open(ring_t *r, unsigned entries) {
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    memset(r, 0, sizeof(*r));
    r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
    if (r->fd < 0)
        return -1;
    r->sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single) {
        if (r->cq_sz > r->sq_sz)
            r->sq_sz = r->cq_sz;
        r->cq_sz = r->sq_sz;
    }
    r->sq_ptr = mmap(NULL, r->sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    if (r->sq_ptr == MAP_FAILED)
        goto fail;
    if (single) {
        r->cq_ptr = r->sq_ptr;
    } else {
        r->cq_ptr = mmap(NULL, r->cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
                         IORING_OFF_CQ_RING);
        if (r->cq_ptr == MAP_FAILED)
            goto fail;
    }
    r->sqes_sz = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(NULL, r->sqes_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED)
        goto fail;
    char *sq = r->sq_ptr, *cq = r->cq_ptr;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    r->sq_entries = p.sq_entries;
    return 0;
fail: {
    int e = errno;
    if (r->sq_ptr && r->sq_ptr != MAP_FAILED)
        munmap(r->sq_ptr, r->sq_sz);
    if (!single && r->cq_ptr && r->cq_ptr != MAP_FAILED)
        munmap(r->cq_ptr, r->cq_sz);
    close(r->fd);
    errno = e;
    return -1;
}
}

static void ring_close(ring_t *r) {
    munmap(r->sqes, r->sqes_sz);
    if (r->cq_ptr != r->sq_ptr)
        munmap(r->cq_ptr, r->cq_sz);
    munmap(r->sq_ptr, r->sq_sz);
    close(r->fd);
}

PyObject *amq_uring_probe(PyObject *self, PyObject *noargs) {
    ring_t r;
    if (ring_open(&r, 2) < 0)
        return Py_BuildValue("(Os)", Py_False, strerror(errno));
    ring_close(&r);
    return Py_BuildValue("(Os)", Py_True, "");
}

#define UD_SYNC (1ull << 62)

PyObject *amq_uring_run(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"path", "block", "region", "writes", "depth", "sync", "align", "duration_ns", "ctl",
                             NULL};
    PyObject *path = NULL, *ctlobj = NULL;
    Py_buffer block, ctlview;
    unsigned long long region, writes, duration = 0;
    int depth = 1, sync = 0, align = 4096;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&y*KK|ipiKO:uring_run", kwlist, PyUnicode_FSConverter,
                                     &path, &block, &region, &writes, &depth, &sync, &align, &duration, &ctlobj))
        return NULL;
    ctl_t c;
    PyObject *res = NULL;
    if (get_ctl(ctlobj, &ctlview, &c) < 0)
        goto out;
    size_t unit;
    if (check_direct(&block, region, depth, 4096, align, &unit) < 0)
        goto out;
    unsigned char *buf = make_units(&block, unit, 1, (size_t)align);
    uint64_t *sent = calloc((size_t)depth, sizeof(uint64_t));
    int *freelist = calloc((size_t)depth, sizeof(int));
    if (!buf || !sent || !freelist) {
        PyErr_NoMemory();
        goto out_free;
    }
    const char *cpath = PyBytes_AS_STRING(path);
    size_t nslots = region / unit;
    fail_t f = {0, NULL};
    lat_t lat = {NULL, 0, 0};
    uint64_t done = 0, t0 = 0, tlast = 0;
    unsigned per = sync ? 2 : 1; /* sqes per write */

    Py_BEGIN_ALLOW_THREADS
    ring_t r;
    int fd = open(cpath, O_RDWR | O_CLOEXEC | O_DIRECT);
    if (fd < 0) {
        FAIL(&f, errno, "open with O_DIRECT");
    } else if (ring_open(&r, (unsigned)depth * per) < 0) {
        FAIL(&f, errno, "io_uring_setup");
        close(fd);
    } else {
        int nfree = depth, inflight = 0; /* inflight counts writes, not sqes */
        for (int i = 0; i < depth; i++)
            freelist[i] = depth - 1 - i;
        uint64_t submitted = 0;
        size_t slot = 0;
        int stopping = 0;
        t0 = tlast = now_ns();
        while (!f.err) {
            if (!stopping && (stop_requested(&c) || (duration && tlast - t0 >= duration)))
                stopping = 1;
            /* each write (with its linked sync) is submitted on its own, as ASYNCIO's io_submit per write */
            while (!stopping && nfree > 0 && submitted < writes) {
                int idx = freelist[--nfree];
                if (slot >= nslots)
                    slot = 0;
                unsigned tail = *r.sq_tail, n = 0;
                struct io_uring_sqe *sqe = &r.sqes[tail & *r.sq_mask];
                memset(sqe, 0, sizeof(*sqe));
                sqe->opcode = IORING_OP_WRITE;
                sqe->fd = fd;
                sqe->addr = (uint64_t)(uintptr_t)buf;
                sqe->len = (unsigned)unit;
                sqe->off = (uint64_t)(slot * unit);
                sqe->user_data = (uint64_t)idx;
                if (sync) {
                    sqe->flags = IOSQE_IO_LINK;
                    r.sq_array[tail & *r.sq_mask] = tail & *r.sq_mask;
                    n++;
                    sqe = &r.sqes[(tail + n) & *r.sq_mask];
                    memset(sqe, 0, sizeof(*sqe));
                    sqe->opcode = IORING_OP_FSYNC;
                    sqe->fd = fd;
                    sqe->fsync_flags = IORING_FSYNC_DATASYNC;
                    sqe->user_data = UD_SYNC | (uint64_t)idx;
                }
                r.sq_array[(tail + n) & *r.sq_mask] = (tail + n) & *r.sq_mask;
                n++;
                sent[idx] = now_ns();
                __atomic_store_n(r.sq_tail, tail + n, __ATOMIC_RELEASE);
                long rc;
                do
                    rc = syscall(__NR_io_uring_enter, r.fd, n, 0, 0, NULL, 0);
                while (rc < 0 && errno == EINTR);
                if (rc < 0) {
                    FAIL(&f, errno, "io_uring_enter");
                    break;
                }
                slot++;
                submitted++;
                inflight++;
            }
            if (f.err || inflight == 0)
                break;
            /* reap: wait for at least one completion unless some are already there (fio's
             * iodepth_batch_complete_min=1), then take all that are (up to `depth`) */
            if (*r.cq_head == __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE)) {
                long rc = syscall(__NR_io_uring_enter, r.fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0);
                if (rc < 0 && errno != EINTR) {
                    FAIL(&f, errno, "io_uring_enter");
                    break;
                }
            }
            uint64_t te = now_ns();
            unsigned head = *r.cq_head;
            unsigned ctail = __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE);
            for (; head != ctail; head++) {
                struct io_uring_cqe *cqe = &r.cqes[head & *r.cq_mask];
                uint64_t ud = cqe->user_data;
                int idx = (int)(ud & ~UD_SYNC);
                int last = sync ? (ud & UD_SYNC) != 0 : 1;
                if (cqe->res < 0) {
                    if (!f.err)
                        FAIL(&f, -cqe->res, (ud & UD_SYNC) ? "io_uring fdatasync" : "io_uring write");
                } else if (!(ud & UD_SYNC) && (size_t)cqe->res != unit) {
                    if (!f.err)
                        FAIL(&f, EIO, "short io_uring write");
                }
                if (last) {
                    freelist[nfree++] = idx;
                    inflight--;
                    if (!f.err) {
                        if (lat_push(&lat, te - sent[idx]) < 0)
                            FAIL(&f, ENOMEM, "latency buffer");
                        done++;
                    }
                }
            }
            __atomic_store_n(r.cq_head, head, __ATOMIC_RELEASE);
            tlast = te;
            publish(&c, done);
        }
        /* drain what is still in flight before tearing the ring down */
        while (inflight > 0) {
            if (syscall(__NR_io_uring_enter, r.fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0 && errno != EINTR)
                break;
            unsigned head = *r.cq_head;
            unsigned ctail = __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE);
            for (; head != ctail; head++) {
                uint64_t ud = r.cqes[head & *r.cq_mask].user_data;
                if (!sync || (ud & UD_SYNC))
                    inflight--;
            }
            __atomic_store_n(r.cq_head, head, __ATOMIC_RELEASE);
        }
        ring_close(&r);
        close(fd);
    }
    Py_END_ALLOW_THREADS

    res = finish(&f, path, done, tlast - t0, &lat);
out_free:
    free(buf);
    free(sent);
    free(freelist);
out:
    return release_args(res, path, &block, &ctlview);
}
