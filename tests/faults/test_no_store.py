"""A fault that leaves nothing recognisable as a store at the path (``tests.faults.model``'s ``no-store``):
the public stores are bindings directories committed alone (../shared/fixtures/artemis/public), so deleting
the ``bindings`` directory leaves their data directory empty. Verify can check nothing there and says UNKNOWN
(man/amqtool-verify.1: exit 3, "nothing recognisable at PATH"); the harness called it a loss and wanted
CRITICAL (campaign seeds 7777 and 7501: a third of the misses over those stores)."""
from __future__ import annotations

import os

import pytest

from tests.support import PUBLIC_JOURNALS

pytestmark = pytest.mark.skipif(not PUBLIC_JOURNALS, reason="public fixtures absent")


def test_bindings_directory_deleted_leaves_no_store():
    from tests.faults import artemis
    from tests.faults.model import GONE, LOSS, UNPROVEN, Fault, classify, expected
    from tests.faults.runner import Campaign, verify_verdict

    data = next(j.parent for j in PUBLIC_JOURNALS if os.listdir(j.parent) == [j.name])
    with Campaign("public", data) as c:
        undo = Fault("delete", "bindings").apply(c.root)
        try:
            verdict, codes = verify_verdict(c.root)
            damaged = c.truth.damaged(c.root)
            truth, diff = classify(c.pristine, damaged, lambda d: False,
                                   lambda: bool(artemis.broker_could_write(c.root)))
        finally:
            undo()
    assert (truth, verdict, codes) == (GONE, "UNKNOWN", ("UnknownStoreError",))
    assert diff["bindings"] > 0 and not damaged.detected
    assert expected(truth, verdict)
    # only UNKNOWN: the other verdicts judge a store that is not there; a readable store is never UNKNOWN
    assert not any(expected(GONE, v) for v in ("OK", "WARNING", "CRITICAL"))
    assert not expected(LOSS, "UNKNOWN") and not expected(UNPROVEN, "UNKNOWN")
