#!/usr/bin/env python3
"""Write manifest.json of a SIGKILLed store (the basic fixture's shape plus `cut`), from Gen kill's
events.jsonl, logwalk.json and the broker's recovered.json. Usage: killmanifest.py DIR LOGSIZE JVM_OPTS"""
import json, re, sys
d, logsize, opts = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ev = [json.loads(l) for l in open(f"{d}/events.jsonl") if l.strip().endswith("}")]
walk = json.load(open(f"{d}/logwalk.json"))
tail = walk["tail"]
rec = json.load(open(f"{d}/recovered.json"))
recovered_ids = {m["id"] for dd in rec["destinations"] for m in dd["messages"] if "id" in m}
sent, events = [], []
begun, ok, cb, cok = {}, set(), {}, set()
acked = []
for e in ev:
    k = e["event"]
    if k == "send_ok": sent.append(e["record"]); ok.add(e["seq"])
    elif k == "send_begin": begun[e["seq"]] = e
    elif k == "commit_ok": sent.extend(e["records"]); cok.add((e["producer"], e["batch"]))
    elif k == "commit_begin": cb[(e["producer"], e["batch"])] = e
    elif k == "acked": acked.append(e["id"])
    else: events.append(e)
events.append({"event": "consumed_client_ack", "dest": "queue://Q.K2", "ids": acked})
in_flight_sends = [{"dest": v["dest"], "seq": s} for s, v in begun.items() if s not in ok]
in_flight_commits = []
for key, v in cb.items():
    if key in cok: continue
    n = sum(i in recovered_ids for i in v["ids"])
    conn = v["ids"][0].rsplit(":", 3)[0]
    in_tail = bool(tail) and conn in tail.get("dataConnectionIds", [])
    in_flight_commits.append({"dest": v["dest"], "producer": key[0], "batch": key[1], "connectionId": conn, "ids": v["ids"],
                              "dataRecordsInCutTail": in_tail,
                              "recoveredByBroker": n == len(v["ids"]), "recoveredMessages": n})
events.append({"event": "in_flight_at_kill", "sends": in_flight_sends, "commits": in_flight_commits})
logs = walk["logs"]
def where(pos):
    for l in logs:
        if l["base"] <= pos < l["base"] + max(l["size"], 1): return {"file": l["file"], "offset": pos - l["base"]}
    return None
cut = {"lastCompleteUowEnd": walk["lastCompleteUowEnd"], "completeUnitsOfWork": walk["completeUnits"],
       "tail": tail, "tailStartsIn": where(tail["start"]) if tail else None,
       "note": "replay stops at tail.start: the records after the last UOW_END record belong to a log unit of work "
               "the SIGKILL cut (one appender call, which batches the broker units of work pending at that moment); "
               "the broker truncates the log there when it restarts"}
m = re.search(r"gen.indexWriteBufferSize=(\d+)", opts)
man = {"store": "store",
       "generator": "Gen kill (ActiveMQ 5.17.2 broker + activemq-leveldb-store 5.16.7 sources, iq80 leveldb 0.7), SIGKILLed",
       "logSize": logsize, "indexWriteBufferSize": m.group(1) if m else None,
       "logCompression": (re.search(r"gen.logCompression=(\w+)", opts) or [None, "none"])[1],
       "indexCompression": (re.search(r"gen.indexCompression=(\w+)", opts) or [None, "snappy"])[1],
       "shutdown": "SIGKILL",
       "jvmOptions": opts, "sent": sent, "events": events, "cut": cut}
json.dump(man, open(f"{d}/manifest.json", "w"), indent=2)
rec["store"] = "recovercopy/store"; json.dump(rec, open(f"{d}/recovered.json", "w"), indent=2)
print("sent ok", len(sent), "in-flight commits", [(c["producer"], c["batch"], c["recoveredByBroker"]) for c in in_flight_commits], "tail", tail and tail["kinds"])
