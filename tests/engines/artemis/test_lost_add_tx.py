"""A transaction discarded for its commit's count whose damage took a message's ADD_TX, its reference whole
(evidence.Evidence.effect_of_discarded, ``intact``).

Campaign miss (seed 5201, fault 5201021603018002: hold-out d77, ``create --demo 40MiB --seed 7307 --live-ratio
0.25``; 4096 zeros at activemq-data-5.amq@1617219): transaction 21742 sent messages 21743, 21744 and 21745, each
ADD_TX followed by its ADD_REF update, then a COMMIT counting 6 records. The zeros took the reference of 21743
and the ADD_TX of 21744, whose reference survived. The broker discards the transaction (4 of 6 records left)
and with it 21744, never consumed. 21743 and 21745 were deleted since, so verify took the surviving reference
of 21744, which no ADD carries, for a reference whose id the damage made up (a rule meant for references read
from damaged bytes) and read WARNING "none of them changes what the broker delivers".

Here on the campaign's demo-s1: every committed transaction of a file in which a message's reference is
followed by the ADD_TX of a message never deleted, whose own reference follows; the two records are zeroed.
"""
from __future__ import annotations

import shutil


def _candidates(store):
    """(file name, first, end) of each such pair of records, zeroed whole."""
    from amqtool.formats.artemis.records import scan_records_py
    from tests.faults.stores import messages_files

    files = [(p, scan_records_py(p.read_bytes(), t, v)[0]) for p, t, v in messages_files(store)]
    deleted = {r[5] for _, rs in files for r in rs if r[0] in (15, 16)}
    out = []
    for path, rs in files:
        for commit in (r for r in rs if r[0] == 18):
            own = [r for r in rs if r[4] == commit[4] and r[0] in (13, 14, 15)]
            if len(own) != commit[8]:  # (tuple: type, offset, size, cc, tx, id, user type, body, nrec, extra)
                continue
            for ref, add, add_ref in zip(own, own[1:], own[2:]):
                if not (ref[0] == 14 and ref[6] == 32 and add[0] == 13 and add[6] == 45 and add_ref[0] == 14
                        and add_ref[5] == add[5] and rs.index(add) == rs.index(ref) + 1):
                    continue
                sent = {r[5] for r in own if r[0] == 13 and r[6] == 45} - {add[5]}
                if add[5] not in deleted and sent and sent <= deleted:
                    out.append((path.relative_to(store), ref[1], add[1] + add[2]))
    return out


def test_a_reference_read_whole_whose_add_the_damage_took_is_a_loss(demo, tmp_path, run_json):
    from tests.faults import artemis

    found = _candidates(demo)
    assert len(found) >= 2
    for n, (rel, first, end) in enumerate(found):
        root = tmp_path / f"s{n}"
        shutil.copytree(demo, root)
        reader = artemis.DeliveredReader(root)
        data = bytearray((root / rel).read_bytes())
        data[first:end] = bytes(end - first)
        (root / rel).write_bytes(bytes(data))
        assert reader.pristine.diff(reader.damaged(root))["lost"]  # the truth: the message is lost
        code, doc, _ = run_json("verify", str(root))
        (mismatch,) = [f for f in doc["findings"] if f["code"] == "commit-count-mismatch"]
        assert mismatch["severity"] == "critical", (rel, first, end)
        assert code == 2
