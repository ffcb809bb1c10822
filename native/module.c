/* The module object of amqtool._native. Python reaches it only through amqtool/native.py. */
#include "amqnative.h"

static PyMethodDef amq_methods[] = {
    {"scan_window", (PyCFunction)(void (*)(void))amq_scan_window, METH_VARARGS | METH_KEYWORDS,
     "scan_window(fd, pos, file_tag, version, check_tag=True, marked=False, window=4 MiB)\n"
     "-> (base, data, records, next_pos, marked, done): scan_records over one window of an open journal\n"
     "file; records (offsets relative to base) lie wholly in data; go on at next_pos until done."},
    {"scan_records", (PyCFunction)(void (*)(void))amq_scan_records, METH_VARARGS | METH_KEYWORDS,
     "scan_records(buf, file_tag, version, check_tag=True, start=16) -> (records, marked_data_file)\n"
     "JournalImpl.readJournalFile over one file's bytes; tuples as scan_records_py."},
    {"checksize_ends", (PyCFunction)amq_checksize_ends, METH_VARARGS,
     "checksize_ends(buf, smallest) -> [end...]: where a record at offset 0 of buf could end (its big-endian\n"
     "checkSize, the four bytes before end, equals end), end from smallest to len(buf) (scanner.c)."},
    {"live_json", (PyCFunction)(void (*)(void))amq_live_json, METH_VARARGS | METH_KEYWORDS,
     "live_json(live, start, stop, data, file_index, file_name_json, type_names_json, safe, first)\n"
     "-> (text, next): print's JSON for a run of live entries in one file (live_json.c)."},
    {"live_run", (PyCFunction)amq_live_run, METH_VARARGS,
     "live_run(live, start, stop, file_index, data_len, base, file_size) -> next: where live_json would stop\n"
     "(live_json.c)."},
    {"compact_layout", (PyCFunction)(void (*)(void))amq_compact_layout, METH_VARARGS | METH_KEYWORDS,
     "compact_layout(live, sources, tail, extra_lens, replaceable, file_size, max_id) -> plan and figures\n"
     "Where compaction writes every record (compact_write.c)."},
    {"compact_fill", (PyCFunction)(void (*)(void))amq_compact_fill, METH_VARARGS | METH_KEYWORDS,
     "compact_fill(plan, start, stop, out, tag, fds, versions, extras, used) -> None or (file_index, offset)\n"
     "Encode one compacted output file's records into out (compact_write.c)."},
    {"compact_sources", (PyCFunction)amq_compact_sources, METH_VARARGS,
     "compact_sources(plan, start, stop, nfiles) -> [file_index...]: the source files items read."},
    {"sha256_available", (PyCFunction)amq_sha256_available, METH_NOARGS,
     "sha256_available() -> bool: did live_json find libcrypto's SHA256?"},
    {"nio_run", (PyCFunction)(void (*)(void))amq_nio_run, METH_VARARGS | METH_KEYWORDS,
     "nio_run(path, block, region, writes, batch=1, coalesce=True, sync=1, oflags=0, align=4096,\n"
     "        duration_ns=0, ctl=None, sync_lat=False) -> (ops, elapsed_ns, latencies[, sync_latencies])\n"
     "pwrite + fdatasync/fsync loop; one latency (ns) per sync."},
    {"aio_run", (PyCFunction)(void (*)(void))amq_aio_run, METH_VARARGS | METH_KEYWORDS,
     "aio_run(path, block, region, writes, depth=1, align=4096, duration_ns=0, ctl=None)\n"
     "O_DIRECT Linux AIO (io_setup/io_submit/io_getevents); one latency per write."},
    {"mapped_run", (PyCFunction)(void (*)(void))amq_mapped_run, METH_VARARGS | METH_KEYWORDS,
     "mapped_run(path, block, region, writes, batch=1, duration_ns=0, ctl=None, sync_lat=False)\n"
     "memcpy into a shared mapping + msync(MS_SYNC) of the whole mapping; one latency per msync."},
    {"uring_run", (PyCFunction)(void (*)(void))amq_uring_run, METH_VARARGS | METH_KEYWORDS,
     "uring_run(path, block, region, writes, depth=1, sync=0, align=4096, duration_ns=0, ctl=None)\n"
     "O_DIRECT io_uring writes (raw syscalls), optionally each linked to an fdatasync."},
    {"aio_probe", (PyCFunction)amq_aio_probe, METH_NOARGS,
     "aio_probe() -> (ok, reason): can this process create a Linux AIO context?"},
    {"uring_probe", (PyCFunction)amq_uring_probe, METH_NOARGS,
     "uring_probe() -> (ok, reason): can this process create an io_uring?"},
    {"kahadb_scan_file", (PyCFunction)(void (*)(void))amq_kahadb_scan_file, METH_VARARGS | METH_KEYWORDS,
     "kahadb_scan_file(buf, file_id, checksums, last_update, hooks) -> tuple\n"
     "KahaDB journal batch scan + replay fast path over one db-N.log; see native/kahadb_scan.c."},
    {"adler32", (PyCFunction)(void (*)(void))amq_adler32, METH_VARARGS,
     "adler32(data, value=1) -> int: java.util.zip.Adler32 / zlib.adler32 (SIMD when the CPU has AVX2)."},
    {"kahadb_check_batches", (PyCFunction)amq_kahadb_check_batches, METH_VARARGS,
     "kahadb_check_batches(buf) -> verified: end of the leading run of good batches (Adler-32 checked,\n"
     "GIL released: run it a file ahead of kahadb_scan_file(..., verified=...))."},
    {"leveldb_scan", (PyCFunction)amq_leveldb_scan, METH_VARARGS,
     "leveldb_scan(buf, base) -> (records, stop, (offsets, lengths, ok), events, complete)\n"
     "One pass over a LevelDB store's log file (framing, CRC-32, UOW chain); see native/leveldb_scan.c."},
    {"leveldb_count_uow_ends", (PyCFunction)amq_leveldb_count_uow_ends, METH_VARARGS,
     "leveldb_count_uow_ends(buf, start, end) -> int: UOW_END records with good CRC-32 at any byte."},
    {"leveldb_entry_rows", (PyCFunction)amq_leveldb_entry_rows, METH_VARARGS,
     "leveldb_entry_rows(items) -> (seqs, locations, lengths, status): a collection's index entries, packed."},
    {"leveldb_index_groups", (PyCFunction)amq_leveldb_index_groups, METH_VARARGS,
     "leveldb_index_groups(index) -> (entries, collections): the index's entry keys by collection, its collection\n"
     "keys, in key order (see native/leveldb_scan.c)."},
    {"leveldb_live", (PyCFunction)amq_leveldb_live, METH_VARARGS,
     "leveldb_live(newest, data) -> highest sequence, or None: the index's live values put in data."},
    {"leveldb_read_log", (PyCFunction)amq_leveldb_read_log, METH_VARARGS,
     "leveldb_read_log(buf) -> [(offset, record)] of a LevelDB log file that reads cleanly, else None."},
    {"leveldb_apply_log", (PyCFunction)amq_leveldb_apply_log, METH_VARARGS,
     "leveldb_apply_log(records, newest) -> (operations, [(offset, error)], records done): a log's write batches."},
    {"leveldb_match_data", (PyCFunction)amq_leveldb_match_data, METH_VARARGS,
     "leveldb_match_data(locations, lengths, scans, last_position, limit) -> packed int64 indices of the\n"
     "entries whose DATA record is not there whole with a good CRC-32 (see native/leveldb_scan.c)."},
    {"migrate_records", (PyCFunction)amq_migrate_records, METH_VARARGS,
     "migrate_records(items, first_id, address_utf16, routing_type, threshold, max_record) -> [(record, body\n"
     "length, redelivery) | None]: create --from's ADD_MESSAGE_PROTOCOL bodies (migrate_records.c)."},
    {"leveldb_apply_batch", (PyCFunction)amq_leveldb_apply_batch, METH_VARARGS,
     "leveldb_apply_batch(batch, newest) -> (operations, error or None): one index write batch applied."},
    {"crc32", (PyCFunction)amq_crc32, METH_VARARGS,
     "crc32(data, value=0) -> int: java.util.zip.CRC32 / zlib.crc32 (PCLMULQDQ when the CPU has it)."},
    {"page_walk", (PyCFunction)(void (*)(void))amq_page_walk, METH_VARARGS | METH_KEYWORDS,
     "page_walk(buf, pos, number, mode, tables=None, acc=None, lists=None, page=0, safe=False, limit=-1,\n"
     "          dumps=None) -> (status, pos, number, length, text): page records; see native/page_scan.c."},
    {"describe_body", (PyCFunction)amq_describe_body, METH_VARARGS,
     "describe_body(user_record_type, body, record_id, is_update, safe) -> str or None\n"
     "The data print text of one record body, or None when Python must write it (describe.c)."},
    {"describe_lines", (PyCFunction)amq_describe_lines, METH_VARARGS,
     "describe_lines(data, version, records, safe) -> [str | int]\n"
     "The operation@ lines of one file's scanned records: runs of lines, and indexes Python writes."},
    {"describe_live", (PyCFunction)amq_describe_live, METH_VARARGS,
     "describe_live(live, start, stop, data, file_index, safe, ref_counts) -> (text, next, messages, large)\n"
     "The surviving-record lines of a run of live entries in one file, with their tallies (describe.c)."},
    {"describe_paged", (PyCFunction)amq_describe_paged, METH_VARARGS,
     "describe_paged(buf, start, end, safe) -> (transaction_id, queue_ids, text) or None\n"
     "data print's text of one paged core message (describe.c); None: decode it in Python."},
    {"message_columns", (PyCFunction)amq_message_columns, METH_VARARGS,
     "message_columns(items, safe) -> (status, strings, fixed, list offsets) or None: export columns."},
    {"jsonl_lines", (PyCFunction)amq_jsonl_lines, METH_VARARGS,
     "jsonl_lines(columns, rows) -> bytes: JSON Lines of an Arrow record batch's buffers."},
    {"tally_live", (PyCFunction)amq_tally_live, METH_VARARGS,
     "tally_live(live, start, stop, data, file_index, acc) -> next: refs, acks and messages into acc\n"
     "(queue_tally.c)."},
    {"tally_counts", (PyCFunction)amq_tally_counts, METH_VARARGS,
     "tally_counts(acc) -> ({queue id: live messages}, messages, large_messages) (queue_tally.c)."},
    {"tally_pairs", (PyCFunction)amq_tally_pairs, METH_VARARGS,
     "tally_pairs(acc) -> (message ids, entries, starts, queue ids, others): export's committed references\n"
     "(queue_tally.c)."},
    {"stat_live", (PyCFunction)amq_stat_live, METH_VARARGS,
     "stat_live(live, start, stop, data, file_index, acc, wbase, fsize) -> next (queue_stat.c)."},
    {"stat_queues", (PyCFunction)amq_stat_queues, METH_VARARGS,
     "stat_queues(acc, now, overrides) -> {queue id: (messages, bytes, oldest, newest, expired, scheduled,\n"
     "redelivered, large)} (queue_stat.c)."},
    {"page_json_available", (PyCFunction)amq_page_json_available, METH_NOARGS,
     "page_json_available() -> bool: did page_scan.c find libcrypto's SHA256 (page_walk mode 2)?"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef amq_module = {
    PyModuleDef_HEAD_INIT, "amqtool._native",
    "C helpers of amqtool: the journal record scanner and the benchmark's timed write loops.\n"
    "Use amqtool.native, never this module directly.",
    -1, amq_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&amq_module);
    if (m != NULL && amq_add_loader(m) < 0) /* journal_load.c: the Loader type */
        Py_CLEAR(m);
    if (m != NULL && amq_add_compact(m) < 0) /* compact_write.c: PLAN_FORMAT */
        Py_CLEAR(m);
    return m;
}
