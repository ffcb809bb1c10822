"""Faults, truth classes and the rule that ties a truth to the verdict it deserves.

A :class:`Fault` is a reproducible change to one store: flip bits of one byte, zero a range, truncate a
file, delete, empty, duplicate or swap files and directories. ``apply(root)`` makes it and returns the undo,
so one working copy serves a whole campaign (a fault costs its own bytes, not a copy of the store).

The truth of a fault (:class:`Truth`) compares what the broker delivers from the pristine store with what it
delivers from the damaged one (rows per queue, bindings, bodies), computed by the loaders the fixtures prove
equal to the brokers'. :func:`expected` is the rule of issue 25:

* ``same``: nothing the broker delivers changed: never CRITICAL (and never UNKNOWN: the store is readable);
* ``content``: the same messages on the same queues, but bytes inside them changed (Artemis has no record
  checksum, so the broker cannot notice): any verdict, counted as undetectable;
* ``torn``: loss confined to the tail of the current file or the current page, what a crash leaves, when the
  damaged store shows it (a tail cut exactly at a record's start leaves none: ``loss-unproven``) (the model of
  ``amqtool/formats/artemis/torn_write.py``: the unsynced records cut anywhere, or whole 4 KiB blocks of them
  unwritten; never a flipped bit, nor a zeroed run ending inside a block before written bytes): WARNING
  (not when the broker refuses to start on a whole record there that does not decode: no crash leaves one);
* ``loss``: anything else the broker loses or brings back (acknowledged messages), when the damaged store
  proves it damaged, and a store the broker does not start on (JournalImpl refuses a file's header, a record
  its load decodes does not decode) when it started on the pristine one, even if that held no message or
  queue: nothing can use the broker until the store is mended: CRITICAL;
* ``no-store``: nothing recognisable as a store is left at the path (the fault deleted the only journal
  directory: a bindings directory committed alone, its data directory now empty): ``verify`` can check nothing
  there and says so, UNKNOWN (man/amqtool-verify.1, exit status 3: "nothing recognisable at PATH"; DESIGN.md:
  3 is "could not check"). An empty directory is also what a broker instance holds before its first start, so
  no reader of the path can prove a loss from it (as ``loss-unproven``), and OK, WARNING or CRITICAL would
  judge a store that is not there: UNKNOWN only;
* ``loss-unproven``: a loss that leaves a store the broker could have written itself, so that nothing in it
  can tell it from an undamaged one: any verdict but UNKNOWN, counted apart (the issue's target applies to
  proven loss). The harness's own oracle decides it (``tests/faults/artemis.py``, ``broker_could_write``),
  from the loaders, never from verify's findings. The damaged store is one a broker could have written when
  every record it holds is consistent with every other, as the broker keeps them (with crashes):
  - no journal file the broker refuses, no two with one fileID;
  - no damaged bytes between records, none at the end of a file that is not the newest (bar an earlier
    use's records), and no room left there for the next file's first record (the broker moves on only for a
    record that does not fit; the compactor's last output excepted);
  - no commit whose record count does not match;
  - no reference, acknowledgement or update of a message with no message record that was never deleted, no
    acknowledgement without its reference, no duplicate-id record that does not decode, no open transaction
    whose id is a live record's, no reference to a queue the bindings do not hold, no bindings record that does
    not decode or is of a type Artemis does not write there, no live large message without its file;
  - no page whose framing ends in damage but the current page's tail as a crash leaves it, no paged message that does not decode
    or names a queue id past every id the journals issued, no cursor acknowledgement past its address's
    current page, no queue whose page counter exceeds the messages its pages still hold.
  What this leaves is loss no reader of the store can see: an acknowledgement's message id moved onto another
  message routed to the same queue; the whole newest or oldest file (or page) gone when nothing later refers
  to it; the message journal of a store with no page file holding messages and no large-message body (a
  bindings directory copied alone reads the same); a queue binding's id moved to an unused id.
  man/amqtool-verify.1, "What verify cannot see", says so.

Rows that only moved to another message id (the same queues, states and content: a paged message's id field
changed, which nothing refers to) are ``content``.

What the broker delivers includes what it will refuse: the duplicate-detection cache it loads from the store
(Artemis: the DUPLICATE_ID records, :class:`Delivered`'s ``caches``). An entry lost is a message the broker
will accept again (a duplicate delivered twice), so it counts as a row lost; an entry's value changed (the
address or the id bytes: no checksum) is ``content``; the same entry under another record id is ``content``
too (the cache holds the same value).
"""
from __future__ import annotations

import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

SAME, CONTENT, TORN, LOSS, UNPROVEN = "same", "content", "torn", "loss", "loss-unproven"
GONE = "no-store"
TRUTHS = (SAME, CONTENT, TORN, LOSS, UNPROVEN, GONE)
VERDICTS = ("OK", "WARNING", "CRITICAL", "UNKNOWN")


@dataclass(frozen=True)
class Fault:
    """One change to a store. ``path`` is relative to the store's root; ``offset``/``length`` are bytes for
    ``flip`` (``length`` is the XOR mask), ``zero`` and ``truncate`` (``offset`` the new size); ``other`` is
    the second path of ``swap`` and ``duplicate``. ``label`` says which structure the site was chosen for."""

    kind: str
    path: str
    offset: int = 0
    length: int = 0
    other: str = ""
    label: str = ""

    def describe(self) -> str:
        where = {"flip": f"@{self.offset} ^0x{self.length:02x}", "zero": f"@{self.offset}+{self.length}",
                 "truncate": f" to {self.offset}"}.get(self.kind, "")
        other = f" -> {self.other}" if self.other else ""
        return f"{self.kind} {self.path}{where}{other} [{self.label}]"

    def apply(self, root: Path) -> Callable[[], None]:
        """Make the change under ``root``; return the function that undoes it exactly."""
        p = root / self.path
        if self.kind == "flip":
            with open(p, "r+b") as f:
                f.seek(self.offset)
                old = f.read(1)
                f.seek(self.offset)
                f.write(bytes([old[0] ^ self.length]))
            return lambda: _write_at(p, self.offset, old)
        if self.kind == "zero":
            with open(p, "r+b") as f:
                f.seek(self.offset)
                old = f.read(self.length)
                f.seek(self.offset)
                f.write(bytes(len(old)))
            return lambda: _write_at(p, self.offset, old)
        if self.kind in ("truncate", "empty"):
            size = 0 if self.kind == "empty" else self.offset
            with open(p, "r+b") as f:
                f.seek(size)
                tail = f.read()
                f.truncate(size)
            return lambda: _write_at(p, size, tail)
        if self.kind == "delete":
            aside = root.parent / f".{root.name}.aside"
            os.rename(p, aside)
            return lambda: os.rename(aside, p)
        if self.kind == "swap":
            q = root / self.other
            tmp = p.with_name(p.name + ".swap")
            os.rename(p, tmp)
            os.rename(q, p)
            os.rename(tmp, q)

            def undo() -> None:
                os.rename(p, tmp)
                os.rename(q, p)
                os.rename(tmp, q)
            return undo
        if self.kind == "duplicate":
            q = root / self.other
            shutil.copyfile(p, q)
            return lambda: os.unlink(q)
        raise ValueError(f"unknown fault kind {self.kind}")


def _write_at(p: Path, offset: int, data: bytes) -> None:
    with open(p, "r+b") as f:
        f.seek(offset)
        f.write(data)


@dataclass(frozen=True)
class Delivered:
    """What the broker delivers from a store: binding rows, and per (queue, message id, transaction state)
    a digest of the row's content (body, properties, counts); and what else the broker holds from the store
    that decides what it accepts next: the entries of its duplicate-detection caches (``caches``, keyed
    ``(kind, record id, state)``, their content digests in ``content`` as ``key + (digest,)``: see
    tests/faults/artemis.py, ``duplicate_ids``). A cache entry lost lets the broker accept again a message it
    would have rejected as a duplicate, one brought back rejects a message it would have accepted: each counts
    as a row lost or brought back; a changed value is a content change."""

    bindings: frozenset
    rows: Counter  # (queue, message id, state) -> count
    content: frozenset  # (queue, message id, state, digest)
    detected: bool = True  # False: nothing recognisable as a store at the path
    # True: the broker does not start because a whole record its load decodes does not decode (nothing is
    # delivered); a crash tears a record's end, which the scan stops at, so this is never a torn tail
    undecodable: bool = False
    # True: the broker does not start because JournalImpl refuses a journal file (a header of another format or
    # user version, a file it cannot read: readFileHeader, orderFiles) or the load throws (nothing is delivered)
    refused: bool = False
    caches: Counter = field(default_factory=Counter)  # (cache kind, record id, state) -> count

    @property
    def starts(self) -> bool:
        """Whether the broker starts on the store."""
        return not (self.undecodable or self.refused)

    def held(self) -> Counter:
        """The rows and the cache entries (their keys never coincide: a row's queue is an id, a cache's kind a
        name)."""
        return self.rows + self.caches if self.caches else self.rows

    def diff(self, other: "Delivered") -> dict:
        mine, theirs = self.held(), other.held()
        lost = mine - theirs
        back = theirs - mine
        out = {"lost": sum(lost.values()), "back": sum(back.values()),
               "bindings": len(self.bindings ^ other.bindings),
               "content": len(self.content ^ other.content)}
        cached = (self.caches - other.caches) + (other.caches - self.caches)
        if cached:  # of lost + back, the cache entries (named only when there are some)
            out["caches"] = sum(cached.values())
        return out


def _moved(pristine: Delivered, damaged: Delivered) -> bool:
    """Whether the rows lost and the rows brought back are the same rows under other message ids (or the same
    cache entries under other record ids)."""
    lost, back = pristine.held() - damaged.held(), damaged.held() - pristine.held()
    if not lost or sum(lost.values()) != sum(back.values()):
        return False

    def rows(d: Delivered, keys) -> Counter:
        return Counter((c[0], c[2], c[3]) for c in d.content if len(c) == 4 and c[:3] in keys)

    return rows(pristine, lost) == rows(damaged, back)


def classify(pristine: Delivered, damaged: Delivered, torn_ok: Callable[[dict], bool],
             proven: Callable[[], bool] | None = None, moved: bool = False) -> tuple[str, dict]:
    """The truth class of a damaged store, and the figures behind it. ``torn_ok(diff)`` says whether the
    fault's loss is confined to the tail of the current file or page (the caller knows the store's
    structure); ``proven()`` whether the damaged store is one no broker writes (the oracle; called on a loss
    only, while the store is damaged); ``moved``: rows that only moved to another message id are content
    (the Artemis harness: a message id nothing refers to)."""
    d = pristine.diff(damaged)
    if not damaged.detected:
        return GONE, d  # nothing left to judge (see the module docstring), whatever the pristine store held
    if pristine.starts and not damaged.starts:
        # the broker does not start: it delivers nothing and accepts nothing until the store is mended, even
        # when the pristine store held no message or queue (no crash refuses a store: see ``undecodable``)
        return LOSS, d
    if not d["bindings"] and (not d["lost"] and not d["back"] or moved and _moved(pristine, damaged)):
        return (CONTENT if d["content"] else SAME), d
    if torn_ok(d) and not damaged.undecodable:
        # a crash's tail that left no trace (the last writes cut exactly at a record's start, the rest the fill)
        # reads as a store the broker wrote: no reader can warn of it
        return (UNPROVEN if proven is not None and not proven() else TORN), d
    if proven is not None and not proven():
        return UNPROVEN, d
    return LOSS, d


# Evidence that a lost tail held what later records depend on (a crash cannot leave that: the broker syncs a
# binding or a message before it writes what refers to it), so CRITICAL is the truth of such a torn tail.
DEPENDANTS = ("ref-unknown-queue", "message-record-missing", "ack-without-ref")


def expected(truth: str, verdict: str, codes: tuple = ()) -> bool:
    """Whether ``verdict`` is what the rule gives a fault of class ``truth``."""
    if truth == TORN and verdict == "CRITICAL" and any(c in DEPENDANTS for c in codes):
        return True
    if truth == SAME:
        return verdict in ("OK", "WARNING")
    if truth == CONTENT:
        return verdict in ("OK", "WARNING", "CRITICAL")
    if truth == TORN:
        return verdict == "WARNING"
    if truth == UNPROVEN:
        return verdict in ("OK", "WARNING", "CRITICAL")
    if truth == GONE:
        return verdict == "UNKNOWN"
    return verdict == "CRITICAL"


@dataclass
class Outcome:
    store: str
    seed: int
    fault: Fault
    truth: str
    verdict: str
    diff: dict
    codes: tuple = ()
    # the untouched store's verdict: one the broker already loses from (a CRITICAL proven by its own recovery,
    # e.g. a replay that stops at a REMOVE_COLLECTION) keeps losing it under a fault that changes nothing
    untouched: str = "OK"

    @property
    def ok(self) -> bool:
        if self.truth == SAME and self.untouched == "CRITICAL":
            return self.verdict == "CRITICAL"
        return expected(self.truth, self.verdict, self.codes)


def confusion(outcomes: list, truths: tuple = TRUTHS, undetectable: str = CONTENT) -> str:
    """The confusion table (truth by verdict), then each miss with its reproducing seed. ``truths``: the
    classes of the store kind's harness, in table order; ``undetectable``: the class counted as such."""
    table = Counter((o.truth, o.verdict) for o in outcomes)
    lines = [f"{'truth':<14}" + "".join(f"{v:>10}" for v in VERDICTS) + f"{'total':>10}"]
    for t in truths:
        n = sum(table[(t, v)] for v in VERDICTS)
        lines.append(f"{t:<14}" + "".join(f"{table[(t, v)]:>10}" for v in VERDICTS) + f"{n:>10}")
    misses = [o for o in outcomes if not o.ok]
    lines.append(f"{len(outcomes)} faults, {len(misses)} miss(es); "
                 f"{sum(1 for o in outcomes if o.truth == undetectable)} undetectable ({undetectable}) changes")
    for o in misses[:200]:
        diff = f" diff={o.diff}" if getattr(o, "diff", None) is not None else ""
        lines.append(f"MISS {o.store} seed={o.seed} truth={o.truth} verdict={o.verdict} {o.fault.describe()}"
                     f"{diff} codes={','.join(o.codes)}")
    return "\n".join(lines)
