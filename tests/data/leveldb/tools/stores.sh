#!/bin/bash
# One store written by Gen MODE, then recovered by the broker on a copy:
#   $OUT/NAME/{store/, manifest.json, recovered.json}, the basic fixture's layout.
# Usage: stores.sh NAME MODE LOGSIZE [JVM -D options...]      (after build.sh)
set -euo pipefail
source "$(dirname "$0")/common.sh"
NAME=$1 MODE=$2 LOGSIZE=$3; shift 3
D=$OUT/$NAME; TMP=$W/tmp-$NAME
rm -rf "$D" "$TMP"; mkdir -p "$D" "$TMP"
gen "$@" -cp "$RCP" Gen "$MODE" "$TMP/store" "$D/manifest.json" "$LOGSIZE" > "$TMP/gen.out" 2>&1 || { tail "$TMP/gen.out"; exit 1; }
rm -rf "$TMP/store/broker-data-unused"
cp -a "$TMP/store" "$D/store"
if [ -n "${POSTPROCESS:-}" ]; then $POSTPROCESS "$D"; fi       # e.g. jni-index: rewrite the index, then recover
cp -a "$D/store" "$TMP/recovercopy"
gen "$@" -cp "$RCP" Gen recover "$TMP/recovercopy" "$D/recovered.json" "$LOGSIZE" > "$TMP/recover.out" 2>&1 || { tail "$TMP/recover.out"; exit 1; }
rm -rf "$TMP"
python3 - "$D" <<'PY'
import json, sys
d = sys.argv[1]
for f, v in (("manifest.json", "store"), ("recovered.json", "recovercopy/store")):
    p = f"{d}/{f}"; j = json.load(open(p)); j["store"] = v; json.dump(j, open(p, "w"), indent=2)
PY
echo "made $D"
