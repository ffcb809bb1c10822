from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "kahadb"


@pytest.fixture(scope="session")
def kahadb_fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"KahaDB fixtures not found at {FIXTURES}")
    return FIXTURES
