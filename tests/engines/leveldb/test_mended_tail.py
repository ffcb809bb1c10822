"""The units of work a damaged record in the last log file drops, judged by their replay with the record mended
(amqtool.engines.leveldb.mended_tail). mix-killed-rotate (lane lv52's n2-kill-rotate): its last file holds
MT123.1 sends, each followed by a unit moving the ack position of s2 (selector ``kind = 'none'``) past it."""
from __future__ import annotations

import pytest

from amqtool.engines.leveldb.load import load
from amqtool.engines.leveldb.mended_tail import mend_tail
from amqtool.engines.leveldb.verify import verify_store
from amqtool.store.layout import detect
from tests.faults.leveldb import delivered, verify_verdict
from tests.faults.model import LOSS, SAME, classify
from tests.support import REPO, copy_tree, flip_byte

ROTATE = REPO / "tests/data/leveldb/mix-killed-rotate/store"
LAST = "0000000000029edf.log"


def _judged(tmp_path, store, log, offset, mask):
    root = copy_tree(store, tmp_path / "store")
    pristine = delivered(root)
    flip_byte(root / log, offset, mask)
    truth, _diff = classify(pristine, delivered(root), lambda d: False)
    findings, _ = verify_store(detect(root))
    return truth, verify_verdict(root)[0], {f.code: f.severity.name for f in findings}


@pytest.mark.parametrize("offset, mask", [
    (502, 0x08),  # a DATA record's magic byte (bench/fuzz_leveldb.py seed 5211, fault 17)
    (448, 0x20),  # an ADD_ENTRY's data: its checksum fails (seed 5211, fault 59)
    (464, 0x40),  # a UOW_END's data (seed 5222, fault 6)
    (38, 0x80),  # a DATA record's stored checksum (seed 5222, fault 61)
    (510, 0x01),  # a DATA record's length
    (1071, 0x01),  # a UOW_END's kind byte
])
def test_dropped_units_that_change_nothing_delivered_are_a_warning(tmp_path, offset, mask):
    """The broker truncates the last file at the damaged record and drops the complete units after it: a
    topic message and the ack that every subscription's position passes it with. Nothing delivered changes:
    the truth is the same store, and verify's leveldb-units-dropped is a WARNING (it was CRITICAL)."""
    truth, verdict, codes = _judged(tmp_path, ROTATE, LAST, offset, mask)
    assert truth == SAME
    assert verdict == "WARNING" and codes["leveldb-units-dropped"] == "WARNING"


def test_a_unit_end_whose_length_took_the_damage_drops_its_unit(tmp_path):
    """The last complete unit's UOW_END (at 1105) with one bit of its length flipped: the broker's scan stops
    there and drops the unit (s2's ack position past seq 5), so the message comes back to it. The mended record
    proves a whole unit, not a crash's cut: CRITICAL leveldb-units-dropped (it was WARNING leveldb-uow-cut)."""
    truth, verdict, codes = _judged(tmp_path, ROTATE, LAST, 1113, 0x10)
    assert truth == LOSS
    assert verdict == "CRITICAL" and codes["leveldb-units-dropped"] == "CRITICAL"


def test_dropped_units_that_deliver_stay_critical(tmp_path):
    """mix-killed: a DATA record's magic byte in the replayed part of the last file; the units after it send to
    queues: dropping them loses messages, mended or not."""
    truth, verdict, codes = _judged(tmp_path, REPO / "tests/data/leveldb/mix-killed/store", "00000000000468cd.log",
                                    105, 0x08)
    assert truth == LOSS
    assert verdict == "CRITICAL" and codes["leveldb-units-dropped"] == "CRITICAL"


def test_an_untouched_killed_store_is_not_mended():
    """A crash's cut (the zero fill after a unit without its UOW_END) is no damaged record: nothing to mend."""
    with load(detect(ROTATE)) as st:
        assert mend_tail(st) is None
