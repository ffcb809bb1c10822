"""Issue 26, acceptance: every writer killed at random instants (SIGKILL, SIGTERM) leaves the source intact,
its output absent or complete and valid, and nothing after the next run. 200 trials here (forked CLI, small
stores); `make fuzz` runs bench/fuzz_kills.py with 2,000."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))


@pytest.mark.slow
@pytest.mark.skipif(not Path("/work/shared/fixtures/kahadb/basic").is_dir(), reason="KahaDB fixture missing")
def test_two_hundred_kills_of_every_writer(tmp_path):
    import fuzz_kills

    lines = []
    problems = fuzz_kills.run(200, seed=26, root=tmp_path, report=lines.append)
    assert problems == [], "\n".join(problems[:20])
    assert lines and lines[0].startswith("200 kills")
