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
