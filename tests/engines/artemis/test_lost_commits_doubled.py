"""An open transaction's message whose id another ADD carries too proves no lost COMMIT (issue 25,
lost_commits.py, tails.added_elsewhere).

``tx-commit-lost`` reads a later delivery (an acknowledgement, a delivery count, a DELETE) of a message an open
transaction sent as proof that the transaction committed and its COMMIT is gone. With the ADD_TX's id damaged
onto the id of another message, stored by its own ADD and delivered since, that delivery is the other
message's: the broker stores a message once. verify called it CRITICAL where the broker delivers what it did
(the open transaction is rolled back either way). The field sweep of ADD ids over real JournalImpl hold-out
stores found it (bench/fuzz_fields.py --fields add-id, seed 9613, h03 9613050006).

On tests/data/artemis/reclaimed-pool2: transaction 2147483912 is left open; its ADD_TX of message 2147483913
lies at activemq-data-5.amq@3315. Message 2147483905 (ADD at @887) is deleted at @10054. Bit 3 of the id's low
byte turns 2147483913 into 2147483905.
"""
from __future__ import annotations

from tests.engines.artemis.pool2 import flipped

ADD_TX = 3315


def test_an_add_id_damaged_onto_a_delivered_message_is_no_commit_lost(tmp_path, run_json):
    def check(data):
        assert data[ADD_TX] == 13 and data[ADD_TX + 6:ADD_TX + 14] == (2147483912).to_bytes(8, "big")
        assert data[ADD_TX + 14:ADD_TX + 22] == (2147483913).to_bytes(8, "big")
    root, diff = flipped(tmp_path, "activemq-data-5.amq", ADD_TX + 21, 0x08, check)
    assert not diff["lost"] and not diff["back"]  # the open transaction is rolled back, as before
    code, doc, _ = run_json("verify", str(root))
    assert not [f for f in doc["findings"] if f["code"] == "tx-commit-lost"], doc["findings"]
    assert code < 2, doc["findings"]
