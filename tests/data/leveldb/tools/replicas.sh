#!/bin/bash
# Replicated-LevelDB-like node directories: one store run in three phases (Gen phase: start, send, consume, stop
# cleanly); the store copied after phase 0 is node-c, after phase 1 node-b, after phase 2 node-a (the latest),
# as replicas lagging two phases, one phase and none would hold. Each node gets store/, manifest.json (what was
# sent up to its copy) and recovered.json; replicas/manifest.json says which node is latest and checks that each
# node's log is a byte prefix of the latest's.   Usage: replicas.sh LOGSIZE     (after build.sh)
set -euo pipefail
source "$(dirname "$0")/common.sh"
LOGSIZE=$1
D=$OUT/replicas; TMP=$W/tmp-replicas
rm -rf "$D" "$TMP"; mkdir -p "$D" "$TMP"
nodes=(node-c node-b node-a)
for p in 0 1 2; do
  n=${nodes[$p]}
  gen -Dgen.indexWriteBufferSize=4096 -Dgen.phase=$p -cp "$RCP" Gen phase "$TMP/store" "$TMP/phase$p.json" "$LOGSIZE" > "$TMP/phase$p.out" 2>&1
  rm -rf "$TMP/store/broker-data-unused"
  mkdir -p "$D/$n"; cp -a "$TMP/store" "$D/$n/store"
  rm -rf "$TMP/rc"; cp -a "$TMP/store" "$TMP/rc"
  gen -Dgen.indexWriteBufferSize=4096 -cp "$RCP" Gen recover "$TMP/rc" "$D/$n/recovered.json" "$LOGSIZE" > "$TMP/recover$p.out" 2>&1
done
python3 "$TOOLS/replicamanifest.py" "$D" "$TMP" "$LOGSIZE"
rm -rf "$TMP"
echo "made $D"
