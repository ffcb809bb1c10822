#!/bin/bash
# The original generator run (the basic fixture is its store2). Usage: gen.sh  (after build.sh)
# The stores under tests/data/leveldb are made by make-all.sh instead.
set -uo pipefail
W=${W:?set W to a scratch directory}; cd $W; OUT=$W/out; mkdir -p $OUT
RCP="$W/build/harness:$(cat build/runtime-classpath.txt)"
JOPTS="--add-exports java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED"
G="java $JOPTS -cp $RCP Gen"
rm -rf store1 store2 store3-kill recovercopy $OUT/store3-kill-events.jsonl
timeout 120 $G clean $W/store1 $OUT/store1-manifest.json                                            # defaults (100 MB sparse log)
timeout 120 java $JOPTS -Dgen.indexWriteBufferSize=4096 -cp $RCP Gen clean $W/store2 $OUT/store2-manifest.json 65536  # 64 KiB logs, SSTs
java $JOPTS -Dgen.indexWriteBufferSize=8192 -cp $RCP Gen kill $W/store3-kill $OUT/store3-kill-events.jsonl 65536 & PID=$!
for i in $(seq 1 120); do n=$(grep -c send_ok $OUT/store3-kill-events.jsonl 2>/dev/null); [ "${n:-0}" -ge 600 ] && break; sleep 0.25; done
kill -9 $PID; wait $PID 2>/dev/null
for s in store1:0 store2:65536 store3-kill:65536; do n=${s%%:*}; mkdir -p recovercopy; cp -a $n recovercopy/$n
  timeout 120 $G recover $W/recovercopy/$n $OUT/$n-recovered.json ${s##*:}; done
