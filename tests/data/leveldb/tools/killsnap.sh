#!/bin/bash
# A store SIGKILLed while it snapshots its index (kill.sh's workload, timed by snapwatch.py): SNAPWATCH=cut
# (default) kills with a temp.index on disk (copyDirtyIndexToSnapshot mid-copy), SNAPWATCH=left with two
# snapshots (the new one renamed, the previous not yet deleted). Then the broker recovers a copy.
# Usage: killsnap.sh NAME LOGSIZE MIN_LOGS [JVM -D options...]      (after build.sh)
set -uo pipefail
source "$(dirname "$0")/common.sh"
NAME=$1 LOGSIZE=$2 MINLOGS=$3; shift 3
D=$OUT/$NAME; TMP=$W/tmp-$NAME
for attempt in 1 2 3 4 5 6; do
  rm -rf "$D" "$TMP"; mkdir -p "$D" "$TMP"
  nice -n 10 java $JOPTS "$@" -cp "$RCP" Gen kill "$TMP/store" "$TMP/events.jsonl" "$LOGSIZE" > "$TMP/gen.out" 2>&1 & PID=$!
  python3 "$TOOLS/snapwatch.py" "$TMP/store" $PID 60 "$MINLOGS" "${SNAPWATCH:-cut}"; hit=$?
  kill -9 $PID 2>/dev/null; wait $PID 2>/dev/null
  if [ $hit = 0 ]; then break; fi
  echo "attempt $attempt: no snapshot caught, again"
done
python3 "$TOOLS/logwalk.py" "$TMP/store" --json > "$TMP/walk.json"
rm -rf "$TMP/store/broker-data-unused"
cp -a "$TMP/store" "$D/store"; cp -a "$TMP/store" "$TMP/recovercopy"
cp "$TMP/events.jsonl" "$D/events.jsonl"; cp "$TMP/walk.json" "$D/logwalk.json"
gen "$@" -cp "$RCP" Gen recover "$TMP/recovercopy" "$D/recovered.json" "$LOGSIZE" > "$TMP/recover.out" 2>&1 || { tail "$TMP/recover.out"; exit 1; }
python3 "$TOOLS/killmanifest.py" "$D" "$LOGSIZE" "$*" || echo "killmanifest failed"
rm -rf "$TMP"
echo "made $D"
