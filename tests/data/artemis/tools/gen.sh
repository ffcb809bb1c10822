#!/bin/bash
# gen.sh OUT FILESIZE SEED OPS COMPACT_EVERY [KILL_AFTER_S]: a store written by the real JournalImpl (Writer.java,
# built by build.sh into $ORACLE_DIR) beside a copy of the real broker's bindings journal of the
# 02_broker_mixed_compacted fixture, whose queue ids (4, 9, 11, 16) the writer routes to. OPS 0 with
# KILL_AFTER_S: written until SIGKILLed. $JOPTS passes -Dpool=N -DmaxBody=B -Dpace=MS -DsendPct=P -Dpin=true -DtxPct=P
# (share of transactions, 20 by default) -Drestart=R (a new JournalImpl loads the journal every R operations)
# -DpairPct=P (share of transactions that are two sending at once, the second rolled back later; 0 by default).
# $BUFFERED=false writes through NIO without the timed buffer (each append its own write), as a broker with
# journal-buffer-timeout 0 does; true by default.
set -e
OUT=$1; FS=$2; SEED=$3; OPS=$4; CE=$5; KILL=$6
FIX=${FIXTURES:-$(cd "$(dirname "$0")/../../../.." && pwd)/../shared/fixtures}
rm -rf "$OUT"; mkdir -p "$OUT"
cp -r "$FIX/artemis/messages/02_broker_mixed_compacted/bindings" "$OUT/"
Q="4:orders,9:events,11:events,16:bulk"
RUN="java $JOPTS -cp $ORACLE_DIR/classes:$(cat "$ORACLE_DIR/cp-writer.txt"):/usr/share/java/slf4j-nop.jar Writer"
if [ -z "$KILL" ]; then
  $RUN "$OUT/journal" "$FS" "$SEED" "$OPS" "$CE" "${BUFFERED:-true}" $Q 2>/dev/null
else
  $RUN "$OUT/journal" "$FS" "$SEED" 0 "$CE" "${BUFFERED:-true}" $Q 2>/dev/null &
  P=$!; sleep "$KILL"; kill -9 $P; wait $P 2>/dev/null || true; echo killed
fi
