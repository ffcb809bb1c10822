/* amqtool._native: shared declarations of the extension's C files.
 *
 * module.c   the module object and its method table
 * scanner.c  the Artemis journal record scanner (JournalImpl.readJournalFile, format doc §1.5)
 * journal_load.c the journal load state machine (JournalImpl.load, §3): the Loader type
 * journal_scan.h the record-candidate logic both share
 * compact_write.c compaction's layout and output-file filling
 * live_json.c print's JSON for runs of live entries (SHA-256 through libcrypto)
 * describe.c `print --style artemis` lines (DescribeJournal) of journal records
 * export_columns.c the export's message columns as Arrow buffers
 * jsonl_batch.c the export's JSON Lines text of Arrow record batches
 * queue_tally.c print JSON's per-queue summary and export's committed references from the packed live entries
 * queue_stat.c  `stat`'s per-queue figures from the packed live entries
 * page_scan.c  page files: framing, paged-message fields and state, print's JSON (amqtool.engines.paging)
 * kahadb_scan.c the KahaDB journal batch scan, Adler-32 and the replay's fast path
 * leveldb_scan.c the LevelDB store's record log scan (framing, CRC-32, UOW chain, entry shapes)
 * bench_io.c the timed write loops of `amqtool bench` (NIO, ASYNCIO, MAPPED, io_uring)
 */
#ifndef AMQTOOL_NATIVE_H
#define AMQTOOL_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *amq_scan_records(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_scan_window(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_checksize_ends(PyObject *self, PyObject *args);
int amq_add_loader(PyObject *module); /* adds Loader and LIVE_FORMAT */
PyObject *amq_live_json(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_live_run(PyObject *self, PyObject *args);
PyObject *amq_sha256_available(PyObject *self, PyObject *noargs);
PyObject *amq_compact_layout(PyObject *self, PyObject *args, PyObject *kwargs); /* compact_write.c */
PyObject *amq_compact_fill(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_compact_sources(PyObject *self, PyObject *args);
int amq_add_compact(PyObject *module); /* adds PLAN_FORMAT */

PyObject *amq_describe_body(PyObject *self, PyObject *args); /* describe.c */
PyObject *amq_describe_lines(PyObject *self, PyObject *args);
PyObject *amq_describe_live(PyObject *self, PyObject *args);
PyObject *amq_describe_paged(PyObject *self, PyObject *args);
PyObject *amq_message_columns(PyObject *self, PyObject *args); /* export_columns.c */
PyObject *amq_jsonl_lines(PyObject *self, PyObject *args); /* jsonl_batch.c */
PyObject *amq_tally_live(PyObject *self, PyObject *args); /* queue_tally.c */
PyObject *amq_tally_pairs(PyObject *self, PyObject *args);
PyObject *amq_tally_counts(PyObject *self, PyObject *args);
PyObject *amq_stat_live(PyObject *self, PyObject *args); /* queue_stat.c */
PyObject *amq_stat_queues(PyObject *self, PyObject *args);

PyObject *amq_page_walk(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_page_json_available(PyObject *self, PyObject *noargs);

PyObject *amq_kahadb_scan_file(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_adler32(PyObject *self, PyObject *args);
PyObject *amq_kahadb_check_batches(PyObject *self, PyObject *args);
PyObject *amq_leveldb_scan(PyObject *self, PyObject *args); /* leveldb_scan.c */
PyObject *amq_leveldb_count_uow_ends(PyObject *self, PyObject *args);
PyObject *amq_crc32(PyObject *self, PyObject *args);
PyObject *amq_leveldb_entry_rows(PyObject *self, PyObject *args);
PyObject *amq_leveldb_apply_batch(PyObject *self, PyObject *args);
PyObject *amq_leveldb_match_data(PyObject *self, PyObject *args);
PyObject *amq_leveldb_apply_log(PyObject *self, PyObject *args);
PyObject *amq_leveldb_read_log(PyObject *self, PyObject *args);
PyObject *amq_leveldb_live(PyObject *self, PyObject *args);
PyObject *amq_leveldb_index_groups(PyObject *self, PyObject *args);
PyObject *amq_migrate_records(PyObject *self, PyObject *args); /* migrate_records.c */

PyObject *amq_nio_run(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_aio_run(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_mapped_run(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_uring_run(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *amq_aio_probe(PyObject *self, PyObject *noargs);
PyObject *amq_uring_probe(PyObject *self, PyObject *noargs);

/* sha256.c: SHA-256 through libcrypto, looked up at first use */
int amq_sha256_ready(void);
void amq_sha256(const unsigned char *d, size_t n, unsigned char md[32]);


/* One packed live entry (native.LIVE_FORMAT "=qB?biqi", journal_load.c's LiveList): record id, user record
 * type, is-update, compact count, file index, body offset, body length. */
#define LIVE_ENTRY 27

static inline void live_entry(const unsigned char *e, int64_t *id, int32_t *file_index, int64_t *offset,
                              int32_t *body_len) {
    memcpy(id, e, 8);
    memcpy(file_index, e + 11, 4);
    memcpy(offset, e + 15, 8);
    memcpy(body_len, e + 23, 4);
}

/* A live entry's body inside a window of its journal file.  `data` holds the file's bytes
 * [base, base + dlen); the file has fsize bytes (fsize < 0: the window ends where the file ends).  The body
 * (off, blen) is first clipped to the file, as LoadResult.body reads it (fewer bytes if the file is
 * shorter); then *bs and *be are set to its bounds in data and 1 returned, or 0 when it is not wholly in the
 * window (the caller stops at that entry and Python reads the window that holds it). */
static inline int body_in_window(int64_t off, int32_t blen, int64_t base, Py_ssize_t dlen, int64_t fsize,
                                 Py_ssize_t *bs, Py_ssize_t *be) {
    if (fsize < 0)
        fsize = base + dlen;
    int64_t s = off < 0 ? 0 : (off > fsize ? fsize : off);
    int64_t e = blen <= 0 ? s : (off + blen > fsize ? fsize : off + blen);
    if (e < s)
        e = s;
    if (s < base || e > base + dlen)
        return 0;
    *bs = (Py_ssize_t)(s - base);
    *be = (Py_ssize_t)(e - base);
    return 1;
}

#endif
