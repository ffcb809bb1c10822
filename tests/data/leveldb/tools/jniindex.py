#!/usr/bin/python3
"""Rewrite every LevelDB index of an ActiveMQ LevelDB store (dirty.index, <pos>.index snapshots, plist.index)
with Debian's C++ libleveldb (through python3-plyvel), the library leveldbjni wraps: the same keys and values,
written into a fresh database with the options LevelDBClient gives the index (snappy compression, 4 KiB
blocks, restart interval 16, write buffer = the store's indexWriteBufferSize), then compacted as
LevelDBClient.compact does with leveldbjni (JniDB.compactRange(null, null)). libleveldb >= 1.14 names its
tables *.ldb; leveldbjni 1.8 bundles an older libleveldb that names them *.sst (same table format), so the
tables are renamed *.sst, as a broker's leveldbjni index has them.

The keys and values come from DumpIndex (DUMP_DIR/<index name>.json, written by the broker's own iq80 LevelDB
reading a copy), not from libleveldb reading the iq80 files: iq80 0.7 records some compaction outputs in its
MANIFEST 4 bytes longer than the file it wrote, which libleveldb then refuses ("Invalid argument").

Usage: jniindex.py STORE WRITE_BUFFER_SIZE DUMP_DIR   (rewrites STORE in place; run it on a copy)"""
import json, os, shutil, sys, tempfile
import plyvel

store, wbs, dumps = sys.argv[1], int(sys.argv[2]), sys.argv[3]
report = []
for name in sorted(os.listdir(store)):
    src = os.path.join(store, name)
    if not (name.endswith(".index") and os.path.isdir(src)):
        continue
    tmp = tempfile.mkdtemp(prefix="jniindex-", dir=os.path.dirname(os.path.abspath(store)))
    dump = json.load(open(os.path.join(dumps, name + ".json")))
    kv = [(bytes.fromhex(r["key"]), bytes.fromhex(r["value"])) for r in dump["records"]]
    new = os.path.join(tmp, "new")
    db = plyvel.DB(new, create_if_missing=True, error_if_exists=True, compression="snappy",
                   block_size=4096, block_restart_interval=16, write_buffer_size=wbs)   # libleveldb clips it to >= 64 KiB
    for k, v in kv:
        db.put(k, v)
    # LevelDBClient.compact calls JniDB.compactRange(null, null) from its periodic GC: the memtable goes to tables
    db.compact_range()
    db.close()
    renamed = []
    for f in sorted(os.listdir(new)):
        if f.endswith(".ldb"):
            os.rename(os.path.join(new, f), os.path.join(new, f[:-4] + ".sst")); renamed.append(f)
    check = os.path.join(tmp, "check")
    shutil.copytree(new, check)                   # opening a LevelDB writes to it: read back a private copy
    c = plyvel.DB(check, create_if_missing=False)
    assert list(c.iterator()) == kv, f"{name}: rewritten index differs"
    c.close()
    shutil.rmtree(src)
    shutil.move(new, src)
    shutil.rmtree(tmp)
    report.append({"index": name, "entries": len(kv), "files": sorted(os.listdir(src)), "renamedFromLdb": renamed})
print(json.dumps(report, indent=1))
