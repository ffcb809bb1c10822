#!/bin/bash
# A copy of store SRC (under $OUT) whose indexes C++ libleveldb rewrote (jni-index.sh), recovered again by the
# broker; checks the broker recovers exactly what it recovered from SRC.
# Usage: rewrite-index.sh SRC NAME LOGSIZE [JVM -D options]      (after build.sh and SRC is made)
set -euo pipefail
source "$(dirname "$0")/common.sh"
SRC=$1 NAME=$2 LOGSIZE=$3; shift 3
D=$OUT/$NAME; TMP=$W/tmp-$NAME
rm -rf "$D" "$TMP"; mkdir -p "$D" "$TMP"
cp -a "$OUT/$SRC/store" "$D/store"; cp "$OUT/$SRC/manifest.json" "$D/manifest.json"
"$TOOLS/jni-index.sh" "$D"
cp -a "$D/store" "$TMP/recovercopy"
gen "$@" -cp "$RCP" Gen recover "$TMP/recovercopy" "$D/recovered.json" "$LOGSIZE" > "$TMP/recover.out" 2>&1 || { tail "$TMP/recover.out"; exit 1; }
rm -rf "$TMP"
python3 - "$OUT/$SRC" "$D" <<'PY'
import json, sys
src, d = sys.argv[1], sys.argv[2]
a = json.load(open(f"{src}/recovered.json")); b = json.load(open(f"{d}/recovered.json"))
a.pop("store"); b.pop("store")
assert a == b, "the broker recovers something else from the rewritten index"
b = json.load(open(f"{d}/recovered.json")); b["store"] = "recovercopy/store"; json.dump(b, open(f"{d}/recovered.json", "w"), indent=2)
m = json.load(open(f"{d}/manifest.json")); m["store"] = "store"
m["index"]["how"] += " The store itself is a copy of the " + src.rsplit("/", 1)[-1] + " store (same log files, same logical index)."
json.dump(m, open(f"{d}/manifest.json", "w"), indent=2)
print("recovered the same as from", src)
PY
echo "made $D"
