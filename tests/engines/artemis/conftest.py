"""Fixtures shared by the Artemis engine tests."""
from __future__ import annotations

import pytest

from tests.support import REPO, copy_tree


@pytest.fixture(scope="module")
def rolled_back(tmp_path_factory):
    """A fault campaign over ``tests/data/artemis/rolled-back-tail`` (README: a JournalImpl store whose
    transactions 2147483797 and later stay open, with rolled-back sends), copied once a module."""
    from tests.faults.runner import Campaign

    root = copy_tree(REPO / "tests" / "data" / "artemis" / "rolled-back-tail",
                     tmp_path_factory.mktemp("rb") / "rolled-back-tail")
    with Campaign("rolled-back-tail", root) as c:
        yield c


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The fault campaign's demo store demo-s1 (:func:`tests.faults.stores.campaign_demo`), built once a module."""
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)
