"""doubled_refs.acks_read_as_refs: which second reference of a (message, queue) is an acknowledgement whose
user record type was damaged, over an evidence built by hand (each reading the module docstring names)."""
from __future__ import annotations

from dataclasses import dataclass, field

from amqtool.engines.artemis.doubled_refs import acks_read_as_refs

ADD_REF, ACK = 32, 33


@dataclass
class _Rec:
    id: int
    body_len: int
    queue: int
    is_update: bool = True
    user_record_type: int = ADD_REF
    file_index: int = 0
    body_offset: int = 0


@dataclass
class _Load:
    live: list

    def body(self, r):
        return r.queue.to_bytes(8, "big") + bytes(r.body_len - 8)


@dataclass
class _Ev:
    live: list
    acked: set = field(default_factory=set)
    deleted: set = field(default_factory=set)
    moved: list = field(default_factory=list)
    deleted_unknown: set = field(default_factory=set)
    explained: set = field(default_factory=set)
    opened: object = None  # no journal files: no write order or deleted message's references to read
    queue_address: dict = field(default_factory=dict)

    def __post_init__(self):
        self._messages = _Load(self.live)
        self.messages = {r.id for r in self.live}
        self.refs = {}
        for r in self.live:
            self.refs.setdefault(r.id, set()).add(r.queue)
        pairs: dict = {}
        for r in self.live:
            pairs[(r.id, r.queue)] = pairs.get((r.id, r.queue), 0) + 1
        self.double_refs = sorted(p for p, n in pairs.items() if n > 1)
        self._deleted = self.deleted

    def moved_refs(self):
        return self.moved

    def requeued_refs(self):
        return []

    def _deleted_later(self, rid):
        return rid in self.deleted


def test_a_second_8_byte_reference_with_no_explanation_is_an_acknowledgement():
    ev = _Ev([_Rec(1000, 8, 7), _Rec(1000, 8, 7), _Rec(1000, 8, 9)])
    assert acks_read_as_refs(ev) == [(1000, 7)]


def test_a_delivery_count_read_as_a_reference_is_not_one():
    # UPDATE_DELIVERY_COUNT (34, one bit from 32) has a 12-byte body: only the count is lost
    ev = _Ev([_Rec(1000, 8, 7), _Rec(1000, 12, 7)])
    assert acks_read_as_refs(ev) == []


def test_a_deleted_message_one_bit_or_one_byte_away_leaves_it_unproven():
    # the reference of message 1001 (deleted since) whose id was damaged onto 1000: its DELETE no longer takes it
    assert acks_read_as_refs(_Ev([_Rec(1000, 8, 7), _Rec(1000, 8, 7)], deleted={1001})) == []
    assert acks_read_as_refs(_Ev([_Rec(1000, 8, 7), _Rec(1000, 8, 7)], deleted={1000 ^ 0x5A})) == []
    assert acks_read_as_refs(_Ev([_Rec(1000, 8, 7), _Rec(1000, 8, 7)], deleted={1000 ^ 0x5A5A})) == [(1000, 7)]


def test_a_pair_acknowledged_or_explained_otherwise_is_not_one():
    assert acks_read_as_refs(_Ev([_Rec(1000, 8, 7), _Rec(1000, 8, 7)], acked={(1000, 7)})) == []
    assert acks_read_as_refs(_Ev([_Rec(1000, 8, 7), _Rec(1000, 8, 7)], moved=[(1000, 7, 1002)])) == []
