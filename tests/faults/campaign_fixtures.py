"""The campaign's demo store as fixtures, for the regression tests of campaign faults (import both names into
a test module: ``from tests.faults.campaign_fixtures import pristine, store``).

``pristine``: demo-s1 (:func:`tests.faults.stores.campaign_demo`), built once per module, read-only;
``store``: a fresh copy of it for one test to damage."""
from __future__ import annotations

import shutil

import pytest

from tests.faults.stores import campaign_demo


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return campaign_demo(tmp_path_factory.mktemp("pristine") / "store")


@pytest.fixture
def store(pristine, tmp_path):
    return shutil.copytree(pristine, tmp_path / "store")
