#!/bin/bash
# A SIGKILLed store. Gen kill runs one producer (Q.K1, Q.K2, T.K with durable subK), a client-ack consumer of
# Q.K2, and gen.txProducers transacted producers committing to Q.KT; tailwatch.py freezes the JVM (SIGSTOP) every
# few ms and SIGKILLs it once the newest log file holds DATA records of >= 2 producer connections after its last
# UOW_END record, i.e. a log unit of work batching several broker units of work is partly on disk.
# Then the broker recovers a copy (recovered.json) and killmanifest.py writes manifest.json with the cut.
# Usage: kill.sh NAME LOGSIZE MIN_LOGS [JVM -D options...]      (after build.sh)
set -uo pipefail
source "$(dirname "$0")/common.sh"
NAME=$1 LOGSIZE=$2 MINLOGS=$3; shift 3
D=$OUT/$NAME; TMP=$W/tmp-$NAME
for attempt in 1 2 3 4 5 6 7 8; do
  rm -rf "$D" "$TMP"; mkdir -p "$D" "$TMP"
  nice -n 10 java $JOPTS "$@" -cp "$RCP" Gen kill "$TMP/store" "$TMP/events.jsonl" "$LOGSIZE" > "$TMP/gen.out" 2>&1 & PID=$!
  python3 "$TOOLS/tailwatch.py" "$TMP/store" $PID 120 "$MINLOGS"; hit=$?
  kill -9 $PID 2>/dev/null; wait $PID 2>/dev/null
  python3 "$TOOLS/logwalk.py" "$TMP/store" --json > "$TMP/walk.json"
  if [ $hit = 0 ] && python3 -c "import json,sys; sys.exit(0 if json.load(open('$TMP/walk.json'))['tail'] else 1)"; then break; fi
  echo "attempt $attempt: no cut unit of work on disk, again"
done
rm -rf "$TMP/store/broker-data-unused"
cp -a "$TMP/store" "$D/store"; cp -a "$TMP/store" "$TMP/recovercopy"
cp "$TMP/events.jsonl" "$D/events.jsonl"; cp "$TMP/walk.json" "$D/logwalk.json"
gen "$@" -cp "$RCP" Gen recover "$TMP/recovercopy" "$D/recovered.json" "$LOGSIZE" > "$TMP/recover.out" 2>&1 || { tail "$TMP/recover.out"; exit 1; }
python3 "$TOOLS/killmanifest.py" "$D" "$LOGSIZE" "$*"
rm -rf "$TMP"
echo "made $D"
