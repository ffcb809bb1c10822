#!/usr/bin/env python3
"""Walk an ActiveMQ LevelDB store's log files and report units of work: where each complete one ends and
what follows the last complete one (records of a cut unit of work, a record cut mid-write).

Usage: logwalk.py STORE_DIR [--json]
Record: '*', kind int8, CRC-32 int32 BE, length uint32 BE, data. UOW_END (kind -1) holds the 8-byte log
position where its unit of work began (RecordLog.scala). Positions are absolute (file base + offset)."""
import json, os, re, struct, sys, zlib
CONN = re.compile(rb'ID:[A-Za-z0-9.-]+-\d+-\d+-\d+:\d+')

KINDS = {1: "ADD_COLLECTION", 2: "REMOVE_COLLECTION", 3: "ADD_ENTRY", 4: "REMOVE_ENTRY", 5: "DATA",
         6: "TRACE", 7: "UPDATE_ENTRY", -1: "UOW_END"}

def walk(store):
    logs = sorted((int(n[:16], 16), n) for n in os.listdir(store) if re.fullmatch(r"[0-9a-f]{16}\.log", n))
    out = {"logs": [], "completeUnits": 0, "lastCompleteUowEnd": None, "tail": None}
    uow_start = None; tail = []; end_reason = None
    for base, name in logs:
        data = open(os.path.join(store, name), "rb").read()
        off = 0; info = {"file": name, "base": base, "size": len(data), "records": 0}
        while off < len(data):
            if data[off] != 0x2A:
                end_reason = "zero fill / not '*'" if data[off] == 0 else "bad prefix 0x%02x" % data[off]
                break
            if off + 10 > len(data):
                end_reason = "header cut at end of file"; break
            kind = struct.unpack(">b", data[off + 1:off + 2])[0]
            crc, length = struct.unpack(">iI", data[off + 2:off + 10])
            body = data[off + 10:off + 10 + length]
            pos = base + off
            if len(body) < length:
                tail.append({"pos": pos, "kind": KINDS.get(kind, kind), "length": length, "cut": "data past end of file (%d of %d bytes)" % (len(body), length)})
                end_reason = "record cut at end of file"; off = len(data); break
            if (zlib.crc32(body) & 0xffffffff) != (crc & 0xffffffff):
                tail.append({"pos": pos, "kind": KINDS.get(kind, kind), "length": length, "cut": "CRC mismatch (partly written)"})
                end_reason = "CRC mismatch"; break
            info["records"] += 1
            if uow_start is None:
                uow_start = pos
            if kind == -1:
                start = struct.unpack(">q", body)[0]
                out["completeUnits"] += 1
                out["lastCompleteUowEnd"] = {"pos": pos, "next": pos + 10 + length, "uowStart": start}
                uow_start = None; tail = []
            else:
                r = {"pos": pos, "kind": KINDS.get(kind, kind), "length": length}
                m = CONN.search(body[:200]) if kind == 5 else None
                if m: r["connectionId"] = m.group().decode()
                tail.append(r)
            off += 10 + length
        info["endOffset"] = off
        info["endReason"] = end_reason or "end of file"
        out["logs"].append(info)
        end_reason = None
    if tail:
        kinds = {}
        for r in tail: kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        conns = sorted({r["connectionId"] for r in tail if "connectionId" in r})
        out["tail"] = {"start": tail[0]["pos"], "end": tail[-1]["pos"] + 10 + tail[-1]["length"], "records": len(tail), "kinds": kinds,
                       "dataConnectionIds": conns, "last": tail[-1], "cutRecord": "cut" in tail[-1]}
    return out

if __name__ == "__main__":
    r = walk(sys.argv[1])
    if "--json" in sys.argv: print(json.dumps(r, indent=1))
    else:
        for l in r["logs"]: print(l)
        print("complete units:", r["completeUnits"], "last UOW_END:", r["lastCompleteUowEnd"])
        print("tail:", r["tail"])
