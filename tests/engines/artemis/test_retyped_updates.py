"""A reference or acknowledgement whose user record type was damaged into a message record's (``update-retyped``):
the broker writes a message record only as an ADD (``storeMessage``) and no message encodes in 8 bytes, so a live
update of a message type whose body is one queue id is the reference (or acknowledgement) retyped, and the load
does not keep the message's references as the broker wrote them (evidence.py ``retyped_updates``)."""
from __future__ import annotations

from tests.faults.model import Fault
from tests.faults.runner import Campaign
from tests.faults.stores import campaign_demo


def test_a_reference_retyped_as_a_message_record_is_critical(tmp_path):
    # dp46's user-type sweep (seed 7754): 2 loss/OK, ADD_REF 32 read as 45 (^0x0d) in the compacted demos d36c and
    # d27cc; demo-s3 has the same: message 43's reference at activemq-data-1.amq@2363 (its type byte at 2381)
    store = campaign_demo(tmp_path / "store", 3)
    with Campaign("demo-s3", store) as c:
        (jf,) = [jf for jf in c.sites.journals["messages"] if jf.rel.endswith("activemq-data-1.amq")]
        (r,) = [r for r in jf.records if r[1] == 2363]
        assert (r[0], r[5], r[6], r[7]) == (12, 43, 32, 8)  # an UPDATE of message 43: ADD_REF, one queue id
        o = c.judge(Fault("flip", jf.rel, 2381, 32 ^ 45))
    assert (o.truth, o.diff["lost"]) == ("loss", 1)
    assert (o.verdict, o.codes) == ("CRITICAL", ("update-retyped",))
