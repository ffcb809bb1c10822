"""Field sweeps of the Artemis messages journal (issue 25): one damaged byte in one field of chosen records.

``make fuzz`` draws a record field with one flipped bit now and then; a damaged byte (any value) in the id of an
acknowledgement, a reference or a DELETE meets far more neighbours and found classes the random campaign
rarely reaches (false OKs among them). Each sweep damages ``--per`` records of each store in one field
(tests/faults/artemis.py's ``_fields`` layout: the id, the transaction id, the user record type, the body size,
the body's first bytes -- a reference's or an acknowledgement's queue id --, the record type, the record count
of a PREPARE or COMMIT), half the time with one flipped bit and half with a random byte, and judges each fault
by the harness's truth (the broker-equal loaders: tests/faults/runner.py). Two more sweeps damage the ends of
older files: the last record's checksize (``last-checksize``) and zeros from inside one of the last four records
to the end (``end-zero``). Three more damage one field of paged messages (``PagedMessageImpl``'s encoding, in the
page files): the transaction id (``page-tx``), the queue count (``page-qcount``) and one queue id (``page-qid``).
``bindings-zero`` zeroes a range of the bindings journal as the campaign's ranges do (a start anywhere in a
file's records, 1 to 4096 bytes or to the records' end). And ``ref-as-message`` sets a reference's or
acknowledgement's user record type to a message record's. Prints each field's confusion table and every miss
with what reproduces it.

    python bench/fuzz_fields.py --stores DIR ... [--seed 9131] [--per 8] [--fields ref-id,ack-id,...]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# field -> (record types, user record types or None for any, field name in tests/faults/artemis._fields)
FIELDS = {
    "ref-id": ((12, 14), (32,), "id"),
    "ref-queue": ((12, 14), (32,), "body"),
    "ack-id": ((12, 14), (33,), "id"),
    "ack-queue": ((12, 14), (33,), "body"),
    "delete-id": ((15, 16), None, "id"),
    "add-id": ((11, 13), None, "id"),
    "record-tx": ((13, 14, 15), None, "txid"),
    "end-tx": ((17, 18, 19), None, "txid"),
    "end-nrec": ((17, 18), None, "nrec"),
    "user-type": ((11, 12, 13, 14), None, "usertype"),
    "body-size": ((11, 12, 13, 14), None, "bodysize"),
    "type": (None, None, "type"),
}
# sweeps of the damaged ends of older files (lone_record.py, refless_add.py): the last record's checksize, one
# byte damaged; zeros from inside one of the last four records to the end of the last
ENDS = ("last-checksize", "end-zero")
# zeroed ranges of the bindings journal (bindings_run.py, lost_binding.py)
BINDINGS = ("bindings-zero",)
# sweeps of paged messages' fields
PAGE_FIELDS = ("page-tx", "page-qcount", "page-qid")
# the user record type of a reference or acknowledgement (8-byte body) set to a message record's (45, 30, 31): one
# damaged byte the random masks of user-type rarely give
RETYPED = {"ref-as-message": ((12, 14), (32, 33), (45, 45, 30, 31))}


def _page_fault(rng: random.Random, root: Path, pages, name: str):
    """A fault of sweep ``name`` in a paged message drawn from ``pages`` (tests/faults/artemis.PageInfo), or
    None when the drawn record does not decode. The record is ``{``, i32 length, PagedMessageImpl, ``}``; the
    encoding ends with i32 queue count and that many i64 queue ids (PagedMessageImpl.encode)."""
    from amqtool.formats.artemis.paging import PagedMessage
    from amqtool.errors import FormatError
    from tests.faults.model import Fault

    pg = rng.choice(pages)
    off, total = rng.choice(pg.records)
    data = (root / pg.rel).read_bytes()[off + 5:off + total - 1]
    try:
        n = len(PagedMessage.decode(data).queue_ids)
    except FormatError:
        return None
    body = off + 5
    mask = 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randrange(1, 256)
    if name == "page-tx":  # i64 first: its low bytes vary most
        at = body + rng.choice([7, 7, 7, 6, 6, *range(8)])
    elif name == "page-qcount":  # the queue count's low byte, one bit most often (a count one or two off)
        at = body + len(data) - 8 * n - 1
        mask = 1 << rng.randrange(3) if rng.random() < 0.7 else mask
    else:
        if not n:
            return None
        at = body + len(data) - 8 * (n - rng.randrange(n)) + rng.choice([7, 7, 7, 6, *range(8)])
    return Fault("flip", pg.rel, at, mask, label=f"paged message {name}")


def _end_fault(rng: random.Random, jf, name: str):
    """A fault of sweep ``name`` at the end of ``jf`` (a file with five records or more), or None."""
    from tests.faults.model import Fault

    last = jf.records[-1]
    end = last[1] + last[2]
    if name == "last-checksize":
        mask = 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randrange(1, 256)
        return Fault("flip", jf.rel, end - 1 - rng.randrange(4), mask, label=f"record {last[0]} {name}")
    r = jf.records[-rng.randint(1, 4)]
    start = r[1] + rng.randrange(max(1, r[2]))
    return Fault("zero", jf.rel, start, end - start, label=f"record {r[0]} {name}")


def _bindings_fault(rng: random.Random, jf):
    """Zeros over a range of bindings journal file ``jf`` drawn as tests/faults/artemis.py's ``_range`` draws."""
    from tests.faults.artemis import HEADER
    from tests.faults.model import Fault

    start = rng.randrange(HEADER, max(jf.data_end, HEADER + 1))
    return Fault("zero", jf.rel, start, rng.choice((1, 4, 16, 64, 512, 4096, jf.data_end - start + 1)),
                 label="bindings zeroed range")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", nargs="+", type=Path, required=True, help="Artemis store roots")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    ap.add_argument("--per", type=int, default=8, help="faults per store and field")
    every = [*FIELDS, *ENDS, *PAGE_FIELDS, *RETYPED, *BINDINGS]
    ap.add_argument("--fields", default=",".join(every), help="comma-separated, of: " + ", ".join(every))
    ap.add_argument("--each", action="store_true",
                    help="also print every fault's outcome, one line each (to compare two runs of one seed)")
    args = ap.parse_args()
    from tests.faults.artemis import _fields
    from tests.faults.model import Fault, confusion
    from tests.faults.runner import Campaign

    fields = args.fields.split(",")
    unknown = [f for f in fields if f not in every]
    if unknown:
        ap.error(f"unknown field(s): {', '.join(unknown)}")
    outcomes: dict[str, list] = {f: [] for f in fields}
    for store in args.stores:
        with Campaign(store.name, store) as campaign:
            records = [(jf, r) for jf in campaign.sites.journals.get("messages", []) for r in jf.records]
            # the older files (every data file of the messages journal but the newest, which a crash may tear)
            older = [jf for jf in campaign.sites.journals.get("messages", []) if len(jf.records) >= 5][:-1]
            pages = [pg for pg in campaign.sites.pages if pg.records]
            bindings = [jf for jf in campaign.sites.journals.get("bindings", []) if jf.records]
            for k, name in enumerate(fields):
                if name in BINDINGS:
                    rng = random.Random(args.seed * 7919 + zlib.crc32(f"{store.name}/{name}".encode()))
                    for i in range(args.per if bindings else 0):
                        fault = _bindings_fault(rng, rng.choice(bindings))
                        outcomes[name].append(campaign.judge(fault, args.seed * 1_000_000 + k * 10_000 + i))
                    continue
                if name in PAGE_FIELDS:
                    rng = random.Random(args.seed * 7919 + zlib.crc32(f"{store.name}/{name}".encode()))
                    for i in range(args.per if pages else 0):
                        fault = _page_fault(rng, campaign.root, pages, name)
                        if fault is not None:
                            outcomes[name].append(campaign.judge(fault, args.seed * 1_000_000 + k * 10_000 + i))
                    continue
                if name in RETYPED:
                    types, utypes, to = RETYPED[name]
                    chosen = [(jf, r) for jf, r in records if r[0] in types and r[6] in utypes and r[7] == 8]
                    rng = random.Random(args.seed * 7919 + zlib.crc32(f"{store.name}/{name}".encode()))
                    for i in range(args.per if chosen else 0):
                        jf, r = rng.choice(chosen)
                        (off, _), = [(o, n) for f, o, n in _fields(r[0], r[2], r[7]) if f == "usertype"]
                        fault = Fault("flip", jf.rel, r[1] + off, r[6] ^ rng.choice(to), label=f"record {r[0]} {name}")
                        outcomes[name].append(campaign.judge(fault, args.seed * 1_000_000 + k * 10_000 + i))
                    continue
                if name in ENDS:
                    rng = random.Random(args.seed * 7919 + zlib.crc32(f"{store.name}/{name}".encode()))
                    for i in range(args.per if older else 0):
                        fault = _end_fault(rng, rng.choice(older), name)
                        outcomes[name].append(campaign.judge(fault, args.seed * 1_000_000 + k * 10_000 + i))
                    continue
                types, utypes, part = FIELDS[name]
                chosen = [(jf, r) for jf, r in records
                          if (types is None or r[0] in types) and (utypes is None or r[6] in utypes)]
                rng = random.Random(args.seed * 7919 + zlib.crc32(f"{store.name}/{name}".encode()))
                for i in range(args.per if chosen else 0):
                    jf, r = rng.choice(chosen)
                    spans = [(off, size) for fname, off, size in _fields(r[0], r[2], r[7]) if fname == part and size]
                    if not spans:
                        continue
                    off, size = spans[0]
                    # an id's low bytes vary most (ids are dense): weigh them, as damage to them meets neighbours
                    low = [size - 1] * 3 + [size - 2] * 2 + list(range(size)) if part.endswith("id") else [0]
                    at = r[1] + off + min(rng.choice(low), size - 1) if part != "body" else \
                        r[1] + off + rng.randrange(min(size, 8))
                    mask = 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randrange(1, 256)
                    fault = Fault("flip", jf.rel, at, mask, label=f"record {r[0]} {name}")
                    outcomes[name].append(campaign.judge(fault, args.seed * 1_000_000 + k * 10_000 + i))
    bad = 0
    for name in fields:
        print(f"== {name}: seed {args.seed}, {len(outcomes[name])} faults over {len(args.stores)} store(s)")
        print(confusion(outcomes[name]))
        bad += sum(1 for o in outcomes[name] if not o.ok)
        for o in outcomes[name] if args.each else ():
            print(f"EACH {o.store} seed={o.seed} truth={o.truth} verdict={o.verdict} {o.fault.describe()}")
    print(f"{bad} miss(es) in all")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
