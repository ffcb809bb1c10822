"""An acknowledgement whose reference was damaged where the broker wrote it (ref_in_place.py).

Fault campaign miss (demos, seed 7676, fault 7676025028006240: demo-s3, one bit of the id of a message's second
ADD_REF flipped, onto the id of a message deleted since): the queue acknowledged that message later, so the
broker delivers the same (the moved reference dies with the deleted message, the acknowledgement is dropped and
the message was consumed there anyway). verify read the acknowledgement as the damaged record instead, its queue
one bit from the message's other queue, and said CRITICAL ack-without-ref."""
from __future__ import annotations

import pytest

from tests.support import copy_tree


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s3", 3)


def _candidate(store):
    """(path, offset of the id byte, mask): a bit of the id of a message's ADD_REF that, flipped, names a message
    added before and deleted after it, where the queue of that reference acknowledged the message and the
    message's other queue is one bit from that queue (what made verify read the acknowledgement as damaged)."""
    from amqtool.formats.artemis.records import scan_records_py
    from tests.faults.stores import messages_files

    files = [(p, p.read_bytes(), scan_records_py(p.read_bytes(), t, v)[0]) for p, t, v in messages_files(store)]
    records = [(fi, r) for fi, (_, _, rs) in enumerate(files) for r in rs]
    pos = {id(r): k for k, (_, r) in enumerate(records)}

    def body(fi, r):
        data = files[fi][1]
        return int.from_bytes(data[r[1] + r[2] - 12:r[1] + r[2] - 4], "big", signed=True)

    adds = {r[5]: pos[id(r)] for _, r in records if r[0] in (11, 13) and r[6] == 45}
    deletes = {r[5]: pos[id(r)] for _, r in records if r[0] == 16}
    acks = {(r[5], body(fi, r)) for fi, r in records if r[0] in (12, 14) and r[6] == 33 and r[7] == 8}
    for fi, (path, data, rs) in enumerate(files):
        for i, r in enumerate(rs):
            if r[0] != 11 or r[6] != 45 or r[5] in deletes:
                continue
            m, refs = r[5], []
            for u in rs[i + 1:]:
                if u[0] != 12 or u[6] != 32 or u[5] != m:
                    break
                refs.append(u)
            queues = [body(fi, u) for u in refs]
            for u, q in zip(refs, queues):
                if (m, q) not in acks or not any(bin(o ^ q).count("1") == 1 for o in queues if o != q):
                    continue
                for bit in range(32):
                    d = m ^ (1 << bit)
                    if d in adds and adds[d] < pos[id(u)] < deletes.get(d, -1):
                        at = u[1] + u[2] - 18 - (bit // 8)  # the id ends 5 bytes before the body (type, size)
                        return path, at, 1 << (bit % 8), m, q
    return None


def test_a_reference_whose_id_was_damaged_in_place_leaves_its_acknowledgement_harmless(run_json, tmp_path, demo):
    from tests.faults import artemis
    from tests.support import flip_byte

    store = copy_tree(demo, tmp_path / "s")
    found = _candidate(store)
    assert found is not None
    path, at, mask, m, q = found
    flip_byte(path, at, mask)
    # the truth: the broker delivers the same
    assert artemis.DeliveredReader(demo).pristine.held() == artemis.DeliveredReader(store).pristine.held()
    code, doc, _ = run_json("verify", store)
    assert not [f for f in doc["findings"] if f["code"] == "ack-without-ref"], doc["findings"]
    assert code in (0, 1)
