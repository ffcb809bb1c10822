#!/usr/bin/env python3
"""manifest.json for each replica node (the sends of the phases it holds, in the basic fixture's shape) and
replicas/manifest.json: the nodes, their log end positions, which one is latest, and whether each node's log
records are a byte prefix of the latest node's. Usage: replicamanifest.py REPLICAS_DIR PHASES_DIR LOGSIZE"""
import json, os, sys
sys.path.insert(0, os.path.dirname(__file__))
from logwalk import walk
d, t, logsize = sys.argv[1], sys.argv[2], int(sys.argv[3])
nodes = ["node-c", "node-b", "node-a"]

def log_bytes(store, end):
    """The log address space [0, end) of a store, from its log files."""
    out = bytearray()
    for n in sorted(f for f in os.listdir(store) if f.endswith(".log") and len(f) == 20):
        base = int(n[:16], 16)
        data = open(os.path.join(store, n), "rb").read()
        assert base == len(out), (store, n)
        out += data[:max(0, min(len(data), end - base))]
        if base + len(data) >= end: break
    return bytes(out[:end])

info = {}
for i, n in enumerate(nodes):
    phases = [json.load(open(f"{t}/phase{p}.json")) for p in range(i + 1)]
    man = dict(phases[-1]); man["store"] = "store"
    man["generator"] = f"Gen phase 0..{i} (ActiveMQ 5.17.2 broker + activemq-leveldb-store 5.16.7 sources, iq80 leveldb 0.7), stopped cleanly after each phase"
    man["sent"] = [s for p in phases for s in p["sent"]]
    man["events"] = [e for p in phases for e in p["events"]]
    json.dump(man, open(f"{d}/{n}/manifest.json", "w"), indent=2)
    r = json.load(open(f"{d}/{n}/recovered.json")); r["store"] = "recovercopy/store"
    json.dump(r, open(f"{d}/{n}/recovered.json", "w"), indent=2)
    w = walk(f"{d}/{n}/store")
    info[n] = {"phases": i + 1, "logEnd": w["lastCompleteUowEnd"]["next"], "completeUnitsOfWork": w["completeUnits"],
               "logFiles": [l["file"] for l in w["logs"]]}
latest = max(info, key=lambda n: info[n]["logEnd"])
ref = log_bytes(f"{d}/{latest}/store", info[latest]["logEnd"])
for n in nodes:
    mine = log_bytes(f"{d}/{n}/store", info[n]["logEnd"])
    info[n]["logIsPrefixOfLatest"] = ref[:len(mine)] == mine
    info[n]["lagBytes"] = info[latest]["logEnd"] - info[n]["logEnd"]
top = {"kind": "replicated-leveldb-like node directories",
       "how": "not written by <replicatedLevelDB> (that needs ZooKeeper and the replicated module, which the Debian build "
              "drops): one LevelDBStore run in three phases (Gen phase 0, 1, 2: each starts the broker on the same store, "
              "sends, consumes, stops cleanly), the store copied after each phase: node-c after phase 0, node-b after "
              "phase 1, node-a after phase 2. A lagging replica holds a prefix of the master's log; so does each copy, "
              "byte for byte up to its logEnd (checked: logIsPrefixOfLatest).",
       "logSize": logsize, "indexWriteBufferSize": "4096",
       "latest": latest, "nodes": info,
       "agreeUpTo": min(info[n]["logEnd"] for n in nodes) if all(info[n]["logIsPrefixOfLatest"] for n in nodes) else None}
json.dump(top, open(f"{d}/manifest.json", "w"), indent=2)
print(json.dumps(top, indent=1))
