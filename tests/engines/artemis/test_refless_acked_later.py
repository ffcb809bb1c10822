"""A message whose references a damaged end took, acknowledged later on some of its queues (refless_add.py).

Field sweep miss (end-zero, seed 49106, faults 49106000004 and 49106000010: demo d57, ``create --demo 48MiB
--seed 8807 --live-ratio 0.25``; zeros from inside one of the references written right after a message's ADD,
the last records of a file the broker moved on from, to its end): the message was acknowledged on one of its two
queues in a later file, and no DELETE names it. The broker loads it with no reference and deletes it at start,
so the other queue loses it. verify read the acknowledgement as the trace of a message acknowledged everywhere
whose DELETE a crash cut off, and said WARNING: but that DELETE would follow the acknowledgement, after the
damage, and survive. Zeros laid exactly over those references (from the ADD's end) leave a clean end, read as
the file's fill: verify said OK (acked_refless.py: message-refs-lost)."""
from __future__ import annotations

import pytest

from tests.support import copy_tree


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.faults.stores import demo as make_demo

    # 6 MiB in 256 KiB files (seed 2): several files end with a message's ADD and its references
    return make_demo(tmp_path_factory.mktemp("demo") / "m", 6 << 20, seed=2, file_size=256 * 1024)


def _candidate(store, inside: int = 16):
    """(path, start, length): from ``inside`` bytes into the first reference after a message's ADD, the last
    records of a file but the newest being that ADD and its references, to the file's last record's end; the
    message is acknowledged in later files on some of its queues but not all, and no DELETE names it."""
    from amqtool.formats.artemis.records import scan_records_py
    from tests.faults.stores import messages_files

    files = [(p, p.read_bytes(), scan_records_py(p.read_bytes(), t, v)[0]) for p, t, v in messages_files(store)]

    def queue(data, r):
        return int.from_bytes(data[r[1] + r[2] - 12:r[1] + r[2] - 4], "big", signed=True)

    deleted = {r[5] for _, _, rs in files for r in rs if r[0] in (15, 16)}
    for fi, (path, data, rs) in enumerate(files[:-1]):
        k = max((i for i, r in enumerate(rs) if r[0] == 11 and r[6] == 45), default=None)
        if k is None or not rs[k + 1:] or any(u[0] != 12 or u[6] != 32 or u[5] != rs[k][5] for u in rs[k + 1:]):
            continue
        m = rs[k][5]
        queues = {queue(data, u) for u in rs[k + 1:]}
        acked = {queue(d, r) for _, d, later in files[fi + 1:] for r in later if r[5] == m and r[6] == 33}
        if m in deleted or not acked or not queues - acked:
            continue
        start = rs[k][1] + rs[k][2] + inside  # 16: the first reference's type, tag, compact count, id, size
        return path, start, rs[-1][1] + rs[-1][2] - start
    return None


@pytest.mark.parametrize("inside", [16, 0])
def test_a_message_acknowledged_after_the_damage_that_took_its_references_is_lost(run_json, tmp_path, demo, inside):
    from tests.faults import artemis

    store = copy_tree(demo, tmp_path / "s")
    found = _candidate(store, inside)
    assert found is not None
    path, start, length = found
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(length))
    # the truth: a queue loses the message
    assert artemis.DeliveredReader(demo).pristine.held() != artemis.DeliveredReader(store).pristine.held()
    code, doc, _ = run_json("verify", store)
    assert code == 2, doc["findings"]
    codes = {f["code"] for f in doc["findings"] if f["severity"] == "critical"}
    assert ("damaged-tail" if inside else "message-refs-lost") in codes, doc["findings"]
