"""gc_paused: the cyclic collector is off inside, restored after (nesting, a caller's own disable, errors)."""
from __future__ import annotations

import gc

import pytest

from amqtool.gcpause import gc_paused


def test_paused_inside_and_restored():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still holds it
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that disabled it keeps it disabled
    finally:
        gc.enable()
