#!/bin/bash
# A store SIGKILLed while its log GC deletes files (Gen subs' workload, timed by gcwatch.py), then recovered
# by the broker on a copy; manifest.json is assembled from the run's streamed records and events.
# Usage: killgc.sh NAME LOGSIZE [JVM -D options...]      (after build.sh)
set -uo pipefail
source "$(dirname "$0")/common.sh"
NAME=$1 LOGSIZE=$2; shift 2
D=$OUT/$NAME; TMP=$W/tmp-$NAME
rm -rf "$D" "$TMP"; mkdir -p "$D" "$TMP"
nice -n 10 java $JOPTS "$@" -Dgen.subs.events="$TMP/events.jsonl" -cp "$RCP" Gen subs "$TMP/store" "$TMP/unused.json" "$LOGSIZE" > "$TMP/gen.out" 2>&1 & PID=$!
python3 "$TOOLS/gcwatch.py" "$TMP/store" $PID 120 > "$TMP/gc.json"; hit=$?
kill -9 $PID 2>/dev/null; wait $PID 2>/dev/null
[ $hit = 0 ] || { echo "no GC deletion seen"; exit 1; }
python3 "$TOOLS/logwalk.py" "$TMP/store" --json > "$D/logwalk.json"
rm -rf "$TMP/store/broker-data-unused"
cp -a "$TMP/store" "$D/store"; cp -a "$TMP/store" "$TMP/recovercopy"
gen "$@" -cp "$RCP" Gen recover "$TMP/recovercopy" "$D/recovered.json" "$LOGSIZE" > "$TMP/recover.out" 2>&1 || { tail "$TMP/recover.out"; exit 1; }
python3 - "$D" "$TMP" "$LOGSIZE" "$*" <<'PY'
import json, sys
d, tmp, logsize, opts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sent, events = [], []
for line in open(f"{tmp}/events.jsonl"):
    try:
        x = json.loads(line)
    except ValueError:
        continue  # the line the kill cut
    (sent if "sent" in x else events).append(x.get("sent") or x.get("event"))
gc = json.load(open(f"{tmp}/gc.json"))
opt = dict(o[2:].split("=", 1) for o in opts.split() if o.startswith("-Dgen.") and "=" in o)
man = {"store": "store", "generator": "Gen subs, SIGKILLed by gcwatch.py (ActiveMQ 5.17.2 broker + "
       "activemq-leveldb-store 5.16.7 sources, iq80 leveldb 0.7)", "logSize": logsize,
       "indexWriteBufferSize": opt.get("gen.indexWriteBufferSize"),
       "logCompression": opt.get("gen.logCompression", "none"), "indexCompression": opt.get("gen.indexCompression", "snappy"),
       "shutdown": "SIGKILL", "jvmOptions": opts, "sent": sent, "events": events,
       "logsSeen": gc["logsSeen"], "logsRemovedByGc": gc["deletedBeforeKill"]}
json.dump(man, open(f"{d}/manifest.json", "w"), indent=2)
r = json.load(open(f"{d}/recovered.json")); r["store"] = "recovercopy/store"; json.dump(r, open(f"{d}/recovered.json", "w"), indent=2)
PY
rm -rf "$TMP"
echo "made $D"
