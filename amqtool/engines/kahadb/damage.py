"""Is damage to the journal read by the broker, or latent? (issue 25: verdicts that match what is lost)

ActiveMQ 5.17 with an index that loads reads the journal at three moments only:

* at start, the records after the index checkpoint ``lastUpdate`` (``MessageDatabase.recover``), and the
  producer-audit and ack-map records page 0 names (``recoverProducerAudit``/``recoverAckMessageFileMap``;
  when one of them cannot be read the broker replays the whole journal on top of the index);
* at start, with ``checkForCorruptJournalFiles=true`` every batch of every file (``Journal.recoveryCheck``),
  and then any corrupted range fails the start (``recoverIndex``: "Detected corrupt journal files");
* at dispatch, each message the order index holds, at its Location and size (``KahaDBStore.loadMessage``),
  less those the records after ``lastUpdate`` acknowledge: the replay takes them out first (after_acks.py).

So damage to a record no index entry points at, before ``lastUpdate``, is latent under the default settings:
consumers get exactly what they got before, and the loss (or the acknowledged messages that come back)
happens only if the index is rebuilt from the journal. Damage to a record the index points at is what
consumers get: a changed body, or a read that stops the broker.

Whether the bytes a live entry points at are intact is decided from the batch checksum (Adler-32): the batch
holding the record must check out, either as stored or once the parts the broker does not read at dispatch
are restored from what the index knows (the record's own 5-byte header: its length is the index's size,
its type is 1; the command's messageId and destination fields), or once the stored checksum itself is
taken as the damaged part (it differs from the computed one in a single byte, as a flipped bit or byte
there leaves it), or when the checksum places a single changed byte outside the OpenWire message bytes the
broker unmarshals (Adler-32 locates a one-byte change: :func:`locate_one_byte`), or when the change is
a zeroed range that ends inside the header of a live record opening its batch (:func:`_zeroed_control_record`),
or when a live record opens a batch whose control record, damaged before its size field (the scan no longer
finds it), still holds a size and an Adler-32 that the batch matches (:func:`_own_control_records_vouch`; or,
when a zeroed range ends in that control record past the start of its size field, the Adler-32 bytes the zeros
left match the batch walked by its records' lengths: a range that ends there does not reach the record).

A zeroed range (a sector or block of zeros: what a failing disk or filesystem leaves) cannot be located by the
checksum, which only says that some bytes changed. A range that ends inside a live record's 5-byte header
leaves a run of zero bytes that ends there (the header's own leading bytes are zero anyway for any size below
16 MiB, or read zero where the index's size says otherwise; its type byte, 1, is never zeroed by such a
range). ``DataFileAccessor.readRecord`` skips the header when the Location carries its size (the index's
does), so the record reads whole. When the record opens its batch, the run reaches back into the batch's
control record: the Adler-32 bytes it left must match the batch data, and when it took all of them nothing can
tell, as for a batch written without a checksum. A run that holds an OpenWire message byte of a live record,
or a zeroed range that ends anywhere else (inside a batch of several records, the checksum cannot place it),
stays CRITICAL.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.openwire import decode_message
from amqtool.engines.kahadb.after_acks import acked_after, gone_after, unsubscribed_after
from amqtool.engines.kahadb.indexed import IndexedMessage, acked_names, read_at
from amqtool.engines.kahadb.unhanded import unhanded
from amqtool.formats.damage import one_byte_apart

_HDR = jr.BATCH_CONTROL_RECORD_HEADER


_BEFORE_ALL = (0, -1)  # a location before every record of a journal (file ids start at 1)


@dataclass
class Evidence:
    """What an index that loads tells about one store directory."""

    live: dict = field(default_factory=dict)  # file id -> [(key, IndexedMessage)] by offset
    checkpoint: list = field(default_factory=list)  # (name, file id, offset) of page 0's journal records
    last_update: tuple | None = None
    openwire_version: int = 11
    acked_after: dict = field(default_factory=dict)  # after_acks.acked_after: acks the replay applies
    # (key, IndexedMessage, the messageIdIndex's id for it) of entries acked after the checkpoint by their own
    # id, which the messageIdIndex names otherwise: the replayed ack finds nothing, the message stays (_comes_back)
    unfound: list = field(default_factory=list)


def evidence(d) -> Evidence | None:
    """None when the broker would not serve from db.data (absent or unreadable: it rebuilds the index)."""
    view = d.index.view if d.index else None
    if view is None or d.indexed is None:
        return None
    ev = Evidence(openwire_version=view.metadata.openwire_version)
    meta = view.metadata
    if meta.last_update is not None:
        ev.last_update = (meta.last_update.log_id, meta.last_update.offset)
    elif d.records_after_last_update:
        # no checkpoint yet (a broker killed before its first one): MessageDatabase.getRecoveryPosition returns
        # journal.getNextLocation(null), and the broker replays every record onto its index, as after one
        ev.last_update = _BEFORE_ALL
    # entries acknowledged by records after the checkpoint leave the index in the replay at start, unread
    acked = ev.acked_after = acked_after(d, ev.last_update) if ev.last_update and d.records_after_last_update else {}
    # and topic entries pending only for subscriptions an UNSUBSCRIBE after the checkpoint removes
    removed = unsubscribed_after(d, ev.last_update) if ev.last_update and d.records_after_last_update else {}
    # topic messages pending only for subscriptions whose selectors do not match them are never handed out
    quiet = unhanded(d, ev.openwire_version, acked) if any(dest.subscriptions for dest in d.indexed.values()) \
        else set()
    # (an ack finds an entry by the messageIdIndex's id for its sequence: indexed.acked_names)
    names = acked_names(d.directory) if acked else {}
    for key, dest in d.indexed.items():
        subs = {}
        if (acked.get(key) or removed.get(key)) and dest.subscriptions:
            for sk, seqs in dest.subscriptions.items():
                for seq in seqs:
                    subs.setdefault(seq, set()).add(sk)
        for m in dest.messages:
            name = names.get(key, {}).get(m.seq, m.message_id)
            if (acked.get(key) or removed.get(key)) and gone_after(acked, key, name, subs.get(m.seq),
                                                                  removed.get(key, ())):
                continue
            if name != m.message_id and acked.get(key, {}).get(m.message_id) and _comes_back(
                    d, key, m, acked[key][m.message_id], ev.openwire_version):
                ev.unfound.append((key, m, name))
            if quiet and (key, m.message_id) in quiet:
                continue
            ev.live.setdefault(m.file_id, []).append((key, m))
    for lst in ev.live.values():
        lst.sort(key=lambda x: x[1].offset)
    for name, loc in (("producer audit", meta.producer_audit), ("ack-file map", meta.ack_map)):
        if loc is not None:
            ev.checkpoint.append((name, loc.log_id, loc.offset))
    return ev


def _comes_back(d, key: str, m: IndexedMessage, by: set, version: int) -> bool:
    """An ack replayed after the checkpoint under ``m``'s own id (``by``: the subscription keys acking it, None
    for a queue ack), which the messageIdIndex does not hold, leaves ``m`` where a consumer gets it again.
    ``updateIndex(KahaRemoveMessageCommand)`` looks the acked id up there: a queue's ``messageIdIndex.remove``
    finds no sequence and nothing leaves the order index; a topic's finds none either, and the subscription
    keeps ``m`` in its ack positions (no LastAck moves past it alone), handed to it again when it was pending
    for it in the index and its selector matches it."""
    if key.split(":", 1)[0] in ("0", "2"):
        return None in by
    dest = d.indexed.get(key)
    holders = [sk for sk in by if sk is not None and dest is not None and m.seq in dest.subscriptions.get(sk, ())]
    if not holders:
        return False
    from amqtool.engines.kahadb.unhanded import _matches_any, selectors

    preds = selectors(d, version)
    return any(preds.get((key, sk)) is None or _matches_any(d, m, [preds[(key, sk)]], version) for sk in holders)


def live_in(ev: Evidence, fid: int, first: int, last: int) -> list:
    """The index's live messages whose record overlaps ``[first, last]`` of file ``fid``."""
    return [(k, m) for k, m in ev.live.get(fid, ()) if m.offset <= last and m.offset + m.size > first]


def read_failure(buf, m: IndexedMessage, version: int, *, openwire: bool = True) -> str | None:
    """Why the broker's read of ``m`` at dispatch fails or gets another message (None: it reads it).
    ``openwire``: also unmarshal the message (for records in damaged batches; in a batch whose checksum
    holds, the broker wrote those bytes, and a message amqtool cannot decode is not damage)."""
    return read_message(buf, m, version, openwire=openwire)[0]


def read_message(buf, m: IndexedMessage, version: int, *, openwire: bool = True) -> tuple:
    """``(why the read fails or None, the ADD command read or None)`` (see :func:`read_failure`). The
    message a consumer gets is the OpenWire one: a command whose own ``messageId`` field differs from the
    index while the OpenWire message is the index's is read right (that field is not read at dispatch)."""
    try:
        add = read_at(buf, m)
    except FormatError as err:
        return err.message, None
    if openwire or add.message_id != m.message_id:
        try:
            msg = decode_message(add.message, version)
            if openwire:
                msg.body_bytes()
        except FormatError as err:
            return err.message, add
        got = msg.message_id if msg.message_id is not None else add.message_id
        if got != m.message_id:
            return f"the record at {m.file_id}:{m.offset} holds message {got}, not {m.message_id}", add
    return None, add


def _batch_starts(buf, lo: int, hi: int) -> list[int]:
    """Offsets of batch control headers in ``[lo, hi)``."""
    out = []
    p = buf.find(_HDR, lo, hi) if hasattr(buf, "find") else bytes(buf).find(_HDR, lo, hi)
    while p != -1:
        out.append(p)
        p = buf.find(_HDR, p + 1, hi)
    return out


def _patched(buf, start: int, end: int, patches: list) -> bytes:
    data = bytearray(buf[start:end])
    for off, raw in patches:
        if start <= off and off + len(raw) <= end:
            data[off - start:off - start + len(raw)] = raw
    return bytes(data)


def intact(buf, fid: int, live: list, region_first: int) -> bool:
    """True when the checksum of the batch holding the live records ``live`` (``[(key, IndexedMessage)]``)
    shows their bytes are as written (see the module docstring)."""
    if not live:
        return True
    first = min(m.offset for _k, m in live)
    last_end = max(m.offset + m.size for _k, m in live)
    starts = [p for p in _batch_starts(buf, max(0, region_first - 4), first) if p + 28 <= first]
    if region_first + 28 <= first and region_first not in starts:
        starts.append(region_first)
    patches = [(m.offset, struct.pack(">iB", m.size, jr.USER_RECORD_TYPE)) for _k, m in live]
    patches += _field_patches(buf, live)
    in_message = False
    for q in sorted(starts, reverse=True)[:4]:
        size_field, stored = struct.unpack_from(">iq", buf, q + 16)
        if stored == 0:
            return True  # written without checksum: nothing can tell (undetectable)
        spans = set()
        if q + 28 + size_field >= last_end and q + 28 + size_field <= len(buf):
            spans.add(size_field)
        walked = _walk(buf, q + 28, {m.offset: m.size for _k, m in live})
        if walked is not None and q + 28 + walked >= last_end:
            spans.add(walked)
        for span in spans:
            data = _patched(buf, q + 28, q + 28 + span, patches)
            computed = zlib.adler32(data) & 0xFFFFFFFF
            if computed == stored or one_byte_apart(computed, stored):
                return True
            # (above 65521 bytes the checksum leaves candidates 65521 apart: those whose restoring leaves a live
            # record as the broker writes it; every one must lie outside the messages read at dispatch)
            ats = [at for at in locate_one_byte(data, stored) if _written_whole(_restore(data, at, stored), q + 28,
                                                                              live)]
            if ats:
                spans = _message_spans(buf, live)
                if not any(lo <= q + 28 + at < hi for at in ats for lo, hi in spans):
                    return True  # one byte changed, outside every message the broker unmarshals at dispatch
                in_message = True  # one byte of a message the broker reads changed: no zeroed range
    return not in_message and (_zeroed_control_record(buf, live, region_first)
                               or _own_control_records_vouch(buf, live, patches))


def _own_control_records_vouch(buf, live: list, patches: list) -> bool:
    """True when every live record opens a batch whose control record, 28 bytes before it, still holds a
    size and an Adler-32 that the batch data (the records' headers and fields restored from the index)
    matches, whatever happened to the control record's length, type and magic before them (a zeroed range
    ending there hides the batch from the scan and from a replay, not from ``readRecord`` at the index's
    Location): the bytes the broker reads at dispatch are as written."""
    covered: set = set()
    for _k, m in sorted(live, key=lambda x: x[1].offset):
        if m.offset in covered:
            continue
        q = m.offset - 28
        if q < 0:
            return False
        size, stored = struct.unpack_from(">iq", buf, q + 16)
        kept = 8  # checksum bytes to compare: all of them, unless a zeroed run took the size and ends in them
        if 0 <= size < m.size:
            # A zeroed run that ends inside the size field (its leading bytes are zero as written for any batch
            # below 16 MiB, so a run over them leaves a size too small for the record) or inside the Adler-32
            # after it: the batch's extent is walked (its records' lengths, the index's where it names them),
            # and the checksum bytes the run left must match (as _zeroed_control_record weighs them; a run that
            # ends there cannot reach the record after the control record, the checksum rules out more damage).
            size = _walk(buf, m.offset, {x.offset: x.size for _k2, x in live}) or 0
            kept = 8 - next((i for i, b in enumerate(bytes(buf[q + 20:q + 28])) if b), 8)
        if stored <= 0 or size < m.size or m.offset + size > len(buf):
            return False
        computed = zlib.adler32(_patched(buf, m.offset, m.offset + size, patches)) & 0xFFFFFFFF
        if computed.to_bytes(8, "big")[8 - kept:] != bytes(buf[q + 28 - kept:q + 28]):
            return False
        covered |= {x.offset for _k2, x in live if m.offset <= x.offset and x.offset + x.size <= m.offset + size}
    return True


def _zeroed_control_record(buf, live: list, region_first: int) -> bool:
    """True when a zeroed range ends inside the header of a live record that is the first of its batch and
    reaches back into that batch's control record, and what is left of the control record vouches for the
    batch: its Adler-32 bytes that are not zero match the batch data (the header restored from the index),
    or none is left (the checksum gone, as for a batch written without one: nothing can tell). The control
    record is known to be there by its magic, or by the batch before it ending exactly there, or is gone
    with the run when no batch control record before the record covers it and the 28 bytes before it are
    zero; the run must hold no OpenWire message byte of a live record."""
    spans_read = _message_spans(buf, live)
    known = {m.offset: m.size for _k, m in live}
    patches = [(m.offset, struct.pack(">iB", m.size, jr.USER_RECORD_TYPE)) for _k, m in live]
    patches += _field_patches(buf, live)
    for _k, m in sorted(live, key=lambda x: x[1].offset):
        q = m.offset - 28
        if q < 0:
            continue
        want = struct.pack(">iB", m.size, jr.USER_RECORD_TYPE)
        got = bytes(buf[m.offset:m.offset + 5])
        if not any(got == bytes(i) + want[i:] for i in range(5)):
            continue
        first = m.offset
        while first > 0 and buf[first - 1] == 0:
            first -= 1
        if first > m.offset - 2 or any(lo < m.offset and first < hi for lo, hi in spans_read):
            continue  # no control record byte zeroed, or a message read lies in the run
        head = bytes(buf[q:q + 16])
        lo = max(0, region_first - 4)
        if head != _HDR:
            if any(p + 28 + struct.unpack_from(">i", buf, p + 16)[0] >= m.offset + m.size
                   for p in _batch_starts(buf, lo, m.offset)):
                continue  # the record's batch has its control record further back: judged by its checksum
            if first > q and not (first <= q + 16 and head[:first - q] == _HDR[:first - q]
                                  and _batch_ends_at(buf, lo, q)):
                continue  # no sign of a control record before the record
            # the record's batch has no control record left with its magic: zeroed with the run (every byte
            # before the record is zero back to where it stood, or what is left of it is a control record's
            # start right where the batch before ends)
        if first <= q + 24:
            return True  # every byte of the Adler-32 is gone: nothing can tell
        size = struct.unpack_from(">i", buf, q + 16)[0] if first >= q + 20 else _walk(buf, m.offset, known)
        if size is None or size < 5 or m.offset + size > len(buf):
            continue
        computed = zlib.adler32(_patched(buf, m.offset, m.offset + size, patches)) & 0xFFFFFFFF
        left = first - (q + 20)  # checksum bytes (of 8, big-endian) not zeroed
        if computed.to_bytes(8, "big")[:left] == bytes(buf[q + 20:first]):
            return True
    return False


def _batch_ends_at(buf, lo: int, end: int) -> bool:
    """A batch control record in ``[lo, end)`` whose batch data ends exactly at ``end``."""
    for p in _batch_starts(buf, lo, end):
        if p + 28 + struct.unpack_from(">i", buf, p + 16)[0] == end:
            return True
    return False


def locate_one_byte(data, stored: int) -> list:
    """The positions in ``data`` at which one changed byte explains the Adler-32 ``stored`` (as written): each
    one whose restoring gives the stored value back; empty when no single byte does. Adler-32 is
    A = 1 + sum(bytes), B = sum of the running A's (mod 65521): a byte at position i of n changed by d moves A
    by d and B by d * (n - i), so d follows, and i up to a multiple of 65521: unique for n below 65521, one
    candidate each 65521 bytes apart above (a 64 KiB body has two)."""
    if stored <= 0 or stored > 0xFFFFFFFF:
        return []
    mod = 65521
    computed = zlib.adler32(data) & 0xFFFFFFFF
    da = ((computed & 0xFFFF) - (stored & 0xFFFF)) % mod
    db = ((computed >> 16) - (stored >> 16)) % mod
    if da == 0:
        return []
    n = len(data)
    k = db * pow(da, -1, mod) % mod
    d = da if da < 256 else da - mod
    out = []
    for i in range(n - k, -1, -mod):
        if not 0 <= i < n or not 0 <= data[i] - d <= 255:
            continue
        fixed = bytearray(data)
        fixed[i] = data[i] - d
        if zlib.adler32(bytes(fixed)) & 0xFFFFFFFF == stored:
            out.append(i)
    return out


def _restore(data, at: int, stored: int) -> bytes:
    """``data`` with its byte ``at`` put back to the value that gives the Adler-32 ``stored``."""
    mod = 65521
    da = (((zlib.adler32(data) & 0xFFFF) - (stored & 0xFFFF)) % mod)
    fixed = bytearray(data)
    fixed[at] = data[at] - (da if da < 256 else da - mod)
    return bytes(fixed)


def _written_whole(data, q: int, live: list) -> bool:
    """``data`` (a batch body starting at file offset ``q``), with one byte restored as the one change
    the checksum explains, holds each live record as the broker writes it: ``MessageDatabase.store`` journals
    the entry type byte and the framed command (``writeFramed``: its varint length, then the command), so the
    framed length ends the command exactly at the record's end (its size, the index's). A candidate whose
    restoring leaves a live record's framed length short of or past its end is not the changed byte."""
    from amqtool.formats.kahadb.protobuf import read_varint

    body = bytes(data)
    for _k, m in live:
        start = m.offset + 5 - q
        if start < 0 or m.offset + m.size - q > len(body):
            continue
        try:
            length, pos = read_varint(body, start + 1, m.offset + m.size - q)
        except FormatError:
            return False
        if pos + length != m.offset + m.size - q:
            return False
    return True


def _message_spans(buf, live: list) -> list:
    """File ranges of the OpenWire message bytes of each live record (what loadMessage unmarshals); the whole
    payload where the command does not decode."""
    out = []
    for _k, m in live:
        start = m.offset + 5
        try:
            add = read_at(buf, m)
            raw = bytes(add.message)
            i = bytes(buf[start:m.offset + m.size]).find(raw) if raw else -1
        except FormatError:
            i = -1
        if i < 0:
            out.append((start, m.offset + m.size))
        else:
            out.append((start + i, start + i + len(raw)))
    return out


def _field_patches(buf, live: list) -> list:
    """What the index knows of fields the broker does not read at dispatch: the command's message id (the
    index's MessageKeys) and destination name (the index's key). Where the record holds other bytes of the
    same length, the patch that restores them (a damaged field there leaves the message read intact)."""
    out = []
    for key, m in live:
        try:
            add = read_at(buf, m)
        except FormatError:
            continue
        start = m.offset + 5
        payload = bytes(buf[start:m.offset + m.size])
        for got, want in ((add.message_id, m.message_id), (add.destination.name if add.destination else None,
                                                           key.partition(":")[2])):
            if got is None:
                continue
            g, w = got.encode("utf-8", "surrogatepass"), want.encode("utf-8", "surrogatepass")
            if g != w and len(g) == len(w) and g:
                i = payload.find(g)
                if i > 0:
                    out.append((start + i, w))
    return out


def _walk(buf, pos: int, known: dict) -> int | None:
    """Bytes of user records from ``pos`` to the next batch header or end marker, taking a record's length
    from ``known`` (the index) where it names the record."""
    start = pos
    n = len(buf)
    for _ in range(1 << 16):
        if pos + 5 > n:
            return None
        head = bytes(buf[pos:pos + 16])
        if head[:5] == jr.EOF_RECORD or head[:5] == jr.ZERO_HEADER or head == _HDR:
            return pos - start
        length = known.get(pos)
        if length is None:
            length = struct.unpack_from(">i", buf, pos)[0]
        if length < 6 or pos + length > n:
            return None
        pos += length
    return None


def checkpoint_failures(d) -> list[str]:
    """The checkpoint records page 0 names that the broker cannot load at start
    (``recoverProducerAudit``/``recoverAckMessageFileMap``: the record read at its Location, header
    included, then Java-deserialized). Any of them makes the broker replay the whole journal on top of
    its index, so what a rebuild would bring back is then delivered."""
    out = []
    for name, loc, want in _checkpoint_records(d):
        f = d.file(loc.log_id)
        if f is None or f.size == 0:
            out.append(f"{name} record {loc} (db-{loc.log_id}.log is gone)")
            continue
        why = _load_failure(f.path, loc.offset, want)
        if why:
            out.append(f"{name} record {loc} ({why})")
    return out


def checkpoint_moved(d) -> dict:
    """``{G: F, F: G}`` when both checkpoint records page 0 names in file F, the file of its ``lastUpdate`` too
    (the producer audit, the ack-file map), do not load there but load at the same offsets of one other file G:
    F and G hold each other's data (files swapped or renamed; KahaDB files carry no id of their own), and what
    the index knew at a location of F is at G's. (Page 0 damaged instead moves one of the three Locations,
    not all.) Else ``{}``."""
    records = _checkpoint_records(d)
    lu = d.index.view.metadata.last_update if records else None
    if len(records) != 2 or lu is None or {loc.log_id for _n, loc, _w in records} != {lu.log_id}:
        return {}
    fid = records[0][1].log_id
    f = d.file(fid)
    if f is None or f.size == 0 or not any(_load_failure(f.path, loc.offset, want) for _n, loc, want in records):
        return {}
    hosts = [g.id for g in d.files if g.id != fid and g.size
             and not any(_load_failure(g.path, loc.offset, want) for _n, loc, want in records)]
    return {hosts[0]: fid, fid: hosts[0]} if len(hosts) == 1 else {}


def _checkpoint_records(d) -> list:
    """``(name, Location, EntryType)`` of the checkpoint records page 0 names (none in a store written before
    these records existed)."""
    from amqtool.formats.kahadb.commands import EntryType

    view = d.index.view if d.index else None
    if view is None:
        return []
    return [(name, loc, want) for name, loc, want in
            (("producer audit", view.metadata.producer_audit, EntryType.PRODUCER_AUDIT),
             ("ack-file map", view.metadata.ack_map, EntryType.ACK_MESSAGE_FILE_MAP)) if loc is not None]


def _load_failure(path, offset: int, want) -> str | None:
    """Why the record of type ``want`` at ``offset`` of the journal file at ``path`` does not load as the broker
    loads it at start (header read at the Location, command decoded, blob Java-deserialized), or None."""
    from amqtool.formats.kahadb.commands import EntryType, decode_command
    from amqtool.formats.kahadb.javaser import decode_ack_file_map
    from amqtool.engines.kahadb.scan import mapped

    try:
        with mapped(path) as buf:
            if offset < 0 or offset + 5 > len(buf):
                raise FormatError("past the end of the file")
            size = struct.unpack_from(">i", buf, offset)[0]
            if size < 6 or offset + size > len(buf):
                raise FormatError(f"record length {size}")
            cmd = decode_command(bytes(buf[offset + 5:offset + size]))
        if cmd.type is not want:
            raise FormatError(f"it is a {cmd.type.name}")
        if want is EntryType.ACK_MESSAGE_FILE_MAP:
            decode_ack_file_map(cmd.blob)
        elif bytes(cmd.blob[:4]) != b"\xac\xed\x00\x05":
            # (the audit's object graph goes beyond what javaser reads: only its stream header is checked)
            raise FormatError("not a Java serialization stream")
    except FormatError as err:
        return err.message
    return None
