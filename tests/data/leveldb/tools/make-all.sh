#!/bin/bash
# Every store of tests/data/leveldb (and the big one for bench/), with the parameters they were made with.
# Usage: W=/scratch OUT=/work/leveldb-stores make-all.sh [NAME...]   (after build.sh; default: all)
set -euo pipefail
TOOLS=$(cd "$(dirname "$0")" && pwd)
export OUT=${OUT:-/work/leveldb-stores}
ALL="${*:-snappy index-none xa gc killed killed-zerofill jni-index jni-index-gc replicas big}"
for n in $ALL; do case $n in
  snappy)   "$TOOLS/stores.sh" snappy clean 8192 -Dgen.logCompression=snappy -Dgen.indexWriteBufferSize=1024 ;;
  index-none) "$TOOLS/stores.sh" index-none clean 65536 -Dgen.indexCompression=none -Dgen.indexWriteBufferSize=4096 ;;
  xa)       "$TOOLS/stores.sh" xa xa 65536 -Dgen.indexWriteBufferSize=4096 ;;
  gc)       "$TOOLS/stores.sh" gc gc 65536 -Dgen.indexWriteBufferSize=4096 ;;
  gc2)      "$TOOLS/stores.sh" gc2 gc 32768 -Dgen.gc.messages=1200 -Dgen.gc.keep=25 -Dgen.indexWriteBufferSize=2048 ;;
  killed)   "$TOOLS/kill.sh" killed 65536 3 -Dgen.indexWriteBufferSize=8192 -Dgen.txProducers=4 -Dgen.txSize=30 -Dgen.txPad=6000 ;;
  killed-zerofill) "$TOOLS/kill.sh" killed-zerofill 4194304 1 -Dgen.indexWriteBufferSize=8192 -Dgen.txProducers=4 -Dgen.txSize=30 -Dgen.txPad=6000 ;;
  killed-snappy) "$TOOLS/kill.sh" killed-snappy 65536 3 -Dgen.logCompression=snappy -Dgen.indexWriteBufferSize=8192 -Dgen.txProducers=4 -Dgen.txSize=30 -Dgen.txPad=6000 ;;
  jni-index) POSTPROCESS="$TOOLS/jni-index.sh" "$TOOLS/stores.sh" jni-index clean 65536 -Dgen.indexWriteBufferSize=4096 ;;
  jni-index-gc) "$TOOLS/rewrite-index.sh" gc jni-index-gc 65536 -Dgen.indexWriteBufferSize=4096 ;;   # after gc
  replicas) "$TOOLS/replicas.sh" 16384 ;;
  big)      GEN_TIMEOUT=1800 "$TOOLS/stores.sh" big bulk 0 -Dgen.recover.bodies=false ;;
  *) echo "unknown store $n"; exit 3 ;;
esac; done
# dirty-index.json beside each committed store (big has none: its index is large and read by the bench only)
for n in $ALL; do case $n in
  big) ;;
  replicas) "$TOOLS/dump-index.sh" "$OUT"/replicas/node-* ;;
  *) "$TOOLS/dump-index.sh" "$OUT/$n" ;;
esac; done
