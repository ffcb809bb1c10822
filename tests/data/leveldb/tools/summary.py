#!/usr/bin/env python3
"""Print what a generated store's recovered.json says: destinations, counts, pending per subscription,
prepared XA transactions; and its log files. Usage: summary.py STORE_DIR (holding store/ and recovered.json)"""
import json, os, sys
d = sys.argv[1]
r = json.load(open(os.path.join(d, "recovered.json")))
for x in r["destinations"]:
    seqs = [m.get("seq") for m in x["messages"]]
    rng = f"seq {seqs[0]}..{seqs[-1]}" if seqs and None not in seqs else ""
    print(f"- `{x['dest']}`: messageCount {x['messageCount']}, {len(x['messages'])} recovered {rng}")
    for s in x.get("durableSubscriptions", []):
        ps = [m.get("seq") for m in s["pending"]]
        print(f"  - subscription `{s['clientId']}`/`{s['subscriptionName']}` selector {s['selector']!r}: pendingCount {s['pendingCount']}, {len(s['pending'])} pending" + (f" (seq {ps[0]}..{ps[-1]})" if ps and None not in ps else ""))
print("- prepared XA transactions:", len(r["preparedTransactions"]))
st = os.path.join(d, "store")
for n in sorted(os.listdir(st)):
    p = os.path.join(st, n)
    print("  ", n, os.path.getsize(p) if os.path.isfile(p) else "dir")
