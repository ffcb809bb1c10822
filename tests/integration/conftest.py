"""Fixtures shared by the integration tests."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ship_cache(tmp_path_factory):
    """One XDG_CACHE_HOME for every export to a real cluster here (a cluster master ships the environment):
    the first export packs the archive (tens of seconds: the venv without PySpark), the next ones reuse it, as
    an operator's later exports do. Packing and reuse themselves are tests/engines/test_export_ship.py's."""
    return tmp_path_factory.mktemp("ship-cache")
