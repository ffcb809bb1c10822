"""A scheduled message's reference whose id was damaged where the broker wrote it (ref_in_place.py).

Field sweep miss (ref-id, seed 49102, fault 49102050005: demo d55, ``create --demo 32MiB --seed 8805
--live-ratio 0.2``, compacted once; byte 12 of a message's third ADD_REF flipped by 0xff): the message was
scheduled, so ``PostOfficeImpl.processRoute`` wrote a SET_SCHEDULED_DELIVERY_TIME update after each of its
references, and the queue of the damaged reference acknowledged the message later. The broker delivers the
same (the acknowledgement finds no reference and is dropped; the message was consumed there anyway). verify
took the run of references to end at the first scheduled update, so found no reference in place, and said
CRITICAL ack-without-ref."""
from __future__ import annotations

import pytest

from tests.support import copy_tree


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.faults.stores import demo as make_demo

    # 6 MiB in 256 KiB files: the campaign's 3 MiB demos hold no scheduled message that meets _candidate
    return make_demo(tmp_path_factory.mktemp("demo") / "m6", 6 << 20, seed=6, file_size=256 * 1024)


def _candidate(store):
    """(path, offset, mask): byte 12 of the id of a scheduled message's ADD_REF, past its first, whose queue
    acknowledged the message later, flipped so that the id names no record and does not read as the message's
    alone: a message one bit away, or several one byte away (none of them is then evidence; the run is)."""
    from amqtool.formats.artemis.records import scan_records_py
    from amqtool.formats.damage import bit_flips
    from tests.faults.stores import messages_files

    files = [(p, p.read_bytes(), scan_records_py(p.read_bytes(), t, v)[0]) for p, t, v in messages_files(store)]
    ids = {r[5] for _, _, rs in files for r in rs}
    deleted = {r[5] for _, _, rs in files for r in rs if r[0] in (15, 16)}
    live = {r[5] for _, _, rs in files for r in rs if r[0] in (11, 13) and r[6] == 45} - deleted

    def queue(data, r):
        return int.from_bytes(data[r[1] + r[2] - 12:r[1] + r[2] - 4], "big", signed=True)

    acks = {(r[5], queue(data, r)) for _, data, rs in files for r in rs if r[0] in (12, 14) and r[6] == 33
            and r[7] == 8}
    refs = {(r[5], queue(data, r)) for _, data, rs in files for r in rs if r[0] in (12, 14) and r[6] == 32
            and r[7] == 8}

    def rival(m, q):
        """Whether ``m`` is still on a queue one bit from ``q`` (what made the acknowledgement of (m, q) look like
        m's own of that queue, its queue id damaged)."""
        return any((m, x) in refs and (m, x) not in acks for x in bit_flips(q))

    for path, data, rs in files:
        for i, r in enumerate(rs):
            if r[0] != 11 or r[6] != 45:
                continue
            run = []
            for u in rs[i + 1:]:
                if u[0] != 12 or u[5] != r[5] or u[6] not in (32, 36):
                    break
                run.append(u)
            own = [u for u in run if u[6] == 32]
            if len(own) < 2 or not any(u[6] == 36 for u in run):
                continue
            for u in own[1:]:
                q = queue(data, u)
                if (r[5], q) not in acks or not rival(r[5], q) or r[5] >= 1 << 16:
                    continue
                for mask in range(1, 256):
                    damaged = r[5] ^ (mask << 8)
                    near = [m for m in live if m & ~0xFF00 == damaged & ~0xFF00]
                    bits = [b for b in range(63) if damaged ^ (1 << b) in live]
                    if damaged not in ids and (len(near) > 1 or bits) \
                            and r[5] not in [damaged ^ (1 << b) for b in bits]:
                        return path, u[1] + 12, mask
    return None


def test_a_scheduled_messages_reference_damaged_in_place_leaves_its_acknowledgement_harmless(run_json, tmp_path,
                                                                                             demo):
    from tests.faults import artemis
    from tests.support import flip_byte

    store = copy_tree(demo, tmp_path / "s")
    found = _candidate(store)
    assert found is not None
    path, at, mask = found
    flip_byte(path, at, mask)
    # the truth: the broker delivers the same
    assert artemis.DeliveredReader(demo).pristine.held() == artemis.DeliveredReader(store).pristine.held()
    code, doc, _ = run_json("verify", store)
    assert not [f for f in doc["findings"] if f["code"] == "ack-without-ref"], doc["findings"]
    assert code in (0, 1)
