#!/bin/bash
# POSTPROCESS for stores.sh: rewrite the store's indexes with C++ libleveldb (jniindex.py), from what the
# broker's iq80 LevelDB reads in them (DumpIndex), and say how in the manifest.
# Usage (by stores.sh): [JNI_WBS=4096] jni-index.sh STORE_OUTPUT_DIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
D=$1; DUMPS=$(mktemp -d)
for i in "$D"/store/*.index; do gen -cp "$RCP" DumpIndex "$i" "$DUMPS/$(basename "$i").json"; done
/usr/bin/python3 "$TOOLS/jniindex.py" "$D/store" "${JNI_WBS:-4096}" "$DUMPS" > "$D/jniindex-report.json"
rm -rf "$DUMPS"
python3 - "$D" <<'PY'
import json, sys
d = sys.argv[1]
m = json.load(open(f"{d}/manifest.json"))
m["index"] = {
    "writer": "C++ libleveldb 1.23 (Debian libleveldb1d, through python3-plyvel), the library leveldbjni wraps",
    "how": "the broker wrote the store with pure-Java iq80 LevelDB; jniindex.py then copied every key/value of each "
           "index (dirty.index, the <pos>.index snapshot, plist.index), as iq80 reads it, into a fresh libleveldb database with the "
           "options LevelDBClient gives its index (snappy, 4 KiB blocks, restart interval 16, write buffer "
           "indexWriteBufferSize, which libleveldb clips to 64 KiB), compacted it as LevelDBClient.compact does "
           "with leveldbjni (compactRange(null, null)), and renamed the *.ldb tables *.sst as the older libleveldb "
           "bundled in leveldbjni 1.8 names them (same table format). recovered.json is what the broker (iq80) "
           "recovered from this rewritten store.",
    "indexes": json.load(open(f"{d}/jniindex-report.json")),
}
json.dump(m, open(f"{d}/manifest.json", "w"), indent=2)
PY
rm "$D/jniindex-report.json"
