#!/bin/bash
# dirty-index.json beside a store: every key/value of its store/dirty.index as the broker's iq80 LevelDB reads
# it (DumpIndex, on a private copy). Usage: dump-index.sh STORE_OUTPUT_DIR...   (after build.sh)
set -euo pipefail
source "$(dirname "$0")/common.sh"
for d in "$@"; do
  gen -cp "$RCP" DumpIndex "$d/store/dirty.index" "$d/dirty-index.json"
  echo "dumped $d/dirty-index.json"
done
