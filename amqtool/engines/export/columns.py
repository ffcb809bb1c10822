"""Message rows as Arrow record batches: what both engines' ``messages`` tables are written from.

A :class:`MessageBatch` collects messages -- each a record body (type 45, or a type-30 large message
header) with the rows it gives, one per queue -- and turns them into one ``pyarrow.RecordBatch`` in
``schema.MESSAGE_COLUMNS`` order. The message columns are decoded

* in C (``native.message_columns``: core, core large and AMQP messages, straight into Arrow buffers), and
* by the Python reference (:func:`~amqtool.engines.export.parse.decode_message`) for whatever C leaves:
  AMQP large messages, a large message whose body file is missing, anything in doubt, and everything when
  the extension is not built (``AMQTOOL_NO_NATIVE=1``).

Both give identical columns (tests/native/test_export_columns.py, on every fixture and on generated
messages). A message is decoded once whatever the number of its queues: its rows take its columns by
index. Undecodable messages become problems in the summary and give no rows; the rows and messages that
are written are counted there as the row-at-a-time path counts them.
"""
from __future__ import annotations

from amqtool import native
from amqtool.engines.export.parse import LargeBodies, decode_message, missing_body, text_safe
from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES, arrow_schema
from amqtool.errors import FormatError

# the columns a message gives (the rest are its row's: queue, position, state ...)
MESSAGE_LEVEL = ("address", "protocol", "durable", "priority", "timestamp", "expiration", "user_id", "type",
                 "typed_properties", "body", "body_size", "body_sha256", "large", "properties", "annotations",
                 "text")
# what each row brings, in this order (see MessageBatch.add)
ROW_LEVEL = ("queue", "queue_id", "routing_type", "paged", "page", "page_position", "delivery_count",
             "scheduled_time", "transaction_state", "transaction_id", "store_message_id")

# native/export_columns.c's buffers, in its order
_STRINGS = ("address", "user_id", "type", "pname", "ptype", "pvalue", "mvalue", "text", "body", "body_sha256",
            "protocol", "mkey", "akey", "avalue")
_FIXED = ("durable", "priority", "timestamp", "expiration", "body_size", "large")

MAX_MESSAGES = 1024
MAX_BODY_BYTES = 16 << 20  # Arrow binary offsets are int32; small batches keep peak memory low


def row(queue: str, queue_id: int | None, routing_type: str | None, *, paged: bool = False, page: int | None = None,
        page_position: int | None = None, delivery_count: int = 0, scheduled_time: int | None = None,
        transaction_state: str = "committed", transaction_id: int | None = None,
        store_message_id: str | None = None) -> tuple:
    """One row's own values (``ROW_LEVEL`` order), for :meth:`MessageBatch.add`."""
    return (queue, queue_id, routing_type, paged, page, page_position, delivery_count, scheduled_time,
            transaction_state, transaction_id, store_message_id)


class MessageBatch:
    """Messages waiting to become one record batch. ``use_native`` None: the C decoder when it is built."""

    def __init__(self, *, safe: bool, large: LargeBodies | None, summary, use_native: bool | None = None):
        import pyarrow as pa

        self.pa = pa
        self.safe = safe
        self.large = large
        self.summary = summary
        self.native = native.HAVE_MESSAGE_COLUMNS if use_native is None else use_native
        self.schema = arrow_schema()
        self._types = {f.name: f.type for f in self.schema}
        self._messages: list[tuple] = []  # (utype, body, message id, rows, where)
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def full(self) -> bool:
        return len(self._messages) >= MAX_MESSAGES or self._bytes >= MAX_BODY_BYTES

    def add(self, user_record_type: int, body: bytes, message_id: int, rows: list[tuple], where: str = "") -> None:
        """One message (record type and body as ``decode_message`` takes them) and its rows (:func:`row`
        tuples). ``where`` prefixes its problem text if it does not decode."""
        self._messages.append((user_record_type, bytes(body), message_id, rows, where))
        self._bytes += len(body)

    def take(self):
        """The batch of everything added (None when no row results), and start afresh."""
        messages, self._messages, self._bytes = self._messages, [], 0
        if not messages:
            return None
        pa = self.pa
        parts, starts = self._decode(messages)
        # row order is message order: C wrote each of its messages' rows in place; a message of the Python
        # part has one entry there, which each of its rows takes
        flat: list[tuple] = []
        mids: list[int] = []
        take_idx: list[int] = []
        identity = True
        decoded = 0
        for (utype, body, mid, rows, where), start in zip(messages, starts):
            if start is None:
                continue
            decoded += 1
            n = len(rows)
            if identity and start != len(flat):
                identity = False
                take_idx = list(range(len(flat)))
            if not identity:
                take_idx.extend(range(start, start + n) if start >= 0 else [-start - 1] * n)
            flat.extend(rows)
            mids.extend([mid] * n)
        if not flat:
            self.summary.messages += decoded
            return None
        row_cols = list(zip(*flat))
        self.summary.count_rows(row_cols[0], row_cols[8])
        self.summary.messages += decoded
        arrays = {}
        for name in MESSAGE_LEVEL:
            col = [p[name] for p in parts]
            col = col[0] if len(col) == 1 else pa.concat_arrays(col)
            arrays[name] = col if identity and len(col) == len(flat) else col.take(
                pa.array(take_idx if not identity else range(len(flat)), type=pa.int64()))
        arrays["message_id"] = pa.array(mids, type=pa.int64())
        for name, values in zip(ROW_LEVEL, row_cols):
            try:
                arrays[name] = pa.array(values, type=self._types[name])
            except UnicodeEncodeError:  # a queue name with a lone surrogate
                arrays[name] = pa.array(text_safe(values), type=self._types[name])
        return pa.RecordBatch.from_arrays([arrays[n] for n in MESSAGE_COLUMN_NAMES], schema=self.schema)

    def check(self) -> None:
        """Decode everything added as :meth:`take` does, recording in the summary the problems it records
        (each message that does not decode, each body that is missing), but build no batch and count no rows
        or messages; and start afresh. For a caller that asks only which messages do not decode (verify):
        the Arrow columns are most of a batch's cost."""
        messages, self._messages, self._bytes = self._messages, [], 0
        if messages:
            self._decode(messages, build=False)

    # --- decoding --------------------------------------------------------------------------------------

    def _decode(self, messages, build: bool = True):
        """The message columns as a list of parts (dicts of arrays: C's first, one entry per row; then the
        Python reference's, one per message), and for each message where its entries start: ``k >= 0``, the
        first of its rows at ``k``; ``-k - 1``, its one entry at ``k``; None, it did not decode. ``build``
        False: the same decoding and problems, no parts (:meth:`check`)."""
        starts: list = [None] * len(messages)
        parts = []
        left = range(len(messages))
        base = 0
        if self.native:
            items = []
            for utype, body, mid, rows, _where in messages:
                data = self.large.read(mid) if utype == 30 and self.large is not None else None
                items.append((utype, body, data, len(rows)))
            result = native.message_columns(items, self.safe)
            if result is not None:
                status, strings, fixed, lists = result
                left = []
                for i, st in enumerate(status):
                    if st == 0:
                        starts[i] = base
                        base += len(messages[i][3])
                    else:
                        left.append(i)
                if base and build:
                    parts.append(self._native_part(base, strings, fixed, lists))
        decoded = []
        for i in left:
            utype, body, mid, _rows, where = messages[i]
            try:
                cols = decode_message(utype, body, message_id=mid, large=self.large, safe=self.safe)
            except FormatError as err:
                self.summary.problem(mid, where + err.message)
                continue
            lost = missing_body(cols, where)
            if lost:
                self.summary.problem(mid, lost)
            starts[i] = -(base + len(decoded)) - 1
            decoded.append(cols)
        if decoded and build:
            pa = self.pa
            part = {}
            for n in MESSAGE_LEVEL:
                values = [c[n] for c in decoded]
                try:
                    part[n] = pa.array(values, type=self._types[n])
                except UnicodeEncodeError:  # a lone surrogate (C left the message to us for it)
                    part[n] = pa.array(text_safe(values), type=self._types[n])
            parts.append(part)
        return parts, starts

    def _native_part(self, n: int, strings, fixed, lists) -> dict:
        pa = self.pa
        buf = pa.py_buffer

        def strings_of(name: str, typ=None, length: int | None = None):
            valid, offs, data = strings[_STRINGS.index(name)]
            length = len(offs) // 4 - 1 if length is None else length
            return pa.Array.from_buffers(typ or pa.string(), length,
                                         [None if valid is None else buf(valid), buf(offs), buf(data)])

        def fixed_of(name: str, typ):
            valid, values = fixed[_FIXED.index(name)]
            return pa.Array.from_buffers(typ, n, [None if valid is None else buf(valid), buf(values)])

        plist, mlist, alist, avalid = lists
        t = self._types
        element = t["typed_properties"].value_type
        structs = pa.StructArray.from_arrays([strings_of("pname"), strings_of("ptype"), strings_of("pvalue")],
                                             fields=list(element))
        typed = pa.Array.from_buffers(t["typed_properties"], n, [None, buf(plist)], children=[structs])

        def map_of(name: str, keys: str, values: str, valid=None):
            typ = t[name]
            entries = pa.StructArray.from_arrays([strings_of(keys), strings_of(values)],
                                                 fields=[typ.key_field, typ.item_field])
            return pa.Array.from_buffers(typ, n, [None if valid is None else buf(valid), buf(mlist if name ==
                                         "properties" else alist)], children=[entries])

        return {
            "address": strings_of("address"),
            "protocol": strings_of("protocol"),
            "durable": fixed_of("durable", pa.bool_()),
            "priority": fixed_of("priority", pa.int32()),
            "timestamp": fixed_of("timestamp", pa.int64()),
            "expiration": fixed_of("expiration", pa.int64()),
            "user_id": strings_of("user_id"),
            "type": strings_of("type"),
            "typed_properties": typed,
            "body": strings_of("body", pa.binary()),
            "body_size": fixed_of("body_size", pa.int64()),
            "body_sha256": strings_of("body_sha256"),
            "large": fixed_of("large", pa.bool_()),
            "properties": map_of("properties", "mkey", "mvalue"),
            "annotations": map_of("annotations", "akey", "avalue", avalid),
            "text": strings_of("text"),
        }
