"""The ``artemis data exp`` XML document, written as a stream (artemis-journal-format.md §6.2).

Layout mirrored from ``XmlDataExporter`` and its ``PrettyPrintHandler``: UTF-8, no XML declaration; every
start tag, empty element and CDATA section is preceded by a line separator and three spaces per depth (so
the document starts with a newline); an end tag goes on a new line unless text was written in the element;
no newline after the root's end tag. Elements and attributes in the exporter's order:

* ``<address-binding routing-types name id/>`` then ``<queue-binding address filter-string name id
  routing-type/>``, each in the exporter's HashMap order (the binding rows arrive in that order);
* ``<message id priority expiration timestamp type [user-id]>`` with ``<properties>`` (always, possibly
  empty), ``<queues>`` and ``<body>``: one CDATA of the body's URL-safe base64, or for a large message
  ``<body isLarge="true">`` and one CDATA per 1000-byte chunk of the body file.

Departures, each for a document that ``data imp`` and any XML parser read back exactly: characters XML 1.0
cannot carry (control characters other than tab/CR/LF, lone surrogates) are replaced by U+FFFD and counted;
tab, CR and LF inside attribute values are written as character references so a parser does not normalise
them to spaces. Prepared (in-doubt) rows are left out, as ``data exp`` leaves prepared transactions out, and
AMQP messages are left out and counted (``data exp`` converts them to core messages, which amqtool does not).
"""
from __future__ import annotations

import re

from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
from amqtool.formats.artemis.primitives import b64url

NL = "\n"  # System.lineSeparator() on the platforms Artemis runs on
INDENT = "   "
LARGE_CHUNK = 1000  # XMLMessageExporter.LARGE_MESSAGE_CHUNK_SIZE

_COL = {name: i for i, name in enumerate(MESSAGE_COLUMN_NAMES)}
_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ATTR_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\t": "&#9;", "\n": "&#10;",
                 "\r": "&#13;"}
_ATTR_SPECIAL = re.compile('[&<>"\t\n\r]')


class XmlExportWriter:
    """Streams the document to a binary file object. Call :meth:`bindings`, then :meth:`messages`, then
    :meth:`close` (or use :func:`write_document`)."""

    def __init__(self, fh):
        self.fh = fh
        self.replaced = 0  # characters replaced by U+FFFD
        self.skipped_amqp = 0
        self.skipped_prepared = 0
        self.messages_written = 0
        self._buf: list[str] = []
        self._size = 0

    # --- low level ------------------------------------------------------------------------------------

    def _w(self, text: str) -> None:
        self._buf.append(text)
        self._size += len(text)
        if self._size > 1 << 20:
            self.flush()

    def flush(self) -> None:
        if self._buf:
            self.fh.write("".join(self._buf).encode("utf-8"))
            self._buf = []
            self._size = 0

    def _clean(self, text: str) -> str:
        if _INVALID.search(text):
            text, n = _INVALID.subn("\ufffd", text)
            self.replaced += n
        return text

    def _attr(self, text) -> str:
        text = self._clean(str(text))
        return _ATTR_SPECIAL.sub(lambda m: _ATTR_ESCAPES[m.group()], text)

    def _empty(self, depth: int, name: str, attrs) -> None:
        parts = [NL, INDENT * depth, "<", name]
        for k, v in attrs:
            parts += [" ", k, '="', self._attr(v), '"']
        parts.append("/>")
        self._w("".join(parts))

    # --- document -------------------------------------------------------------------------------------

    def bindings(self, binding_rows) -> None:
        """Open the document and write the bindings (``schema.BINDING_COLUMNS`` rows, in order)."""
        self._w(NL + "<activemq-journal>")
        self._w(NL + INDENT + "<bindings>")
        rows = list(binding_rows)
        for kind, bid, name, _address, routing, _filter, _auto, _user in rows:
            if kind == "address":
                self._empty(2, "address-binding", (("routing-types", routing or ""), ("name", name), ("id", bid)))
        for kind, bid, name, address, routing, filt, _auto, _user in rows:
            if kind == "queue":
                self._empty(2, "queue-binding", (("address", address or ""), ("filter-string", filt or ""),
                                                 ("name", name), ("id", bid), ("routing-type", routing or "")))
        self._w(NL + INDENT + "</bindings>")
        self._w(NL + INDENT + "<messages>")

    def messages(self, rows) -> None:
        """Write messages from export rows grouped by message id (consecutive rows of one message, in
        the order their queues are to be listed)."""
        c = _COL
        current = None
        queues: list[str] = []
        for row in rows:
            if row[c["transaction_state"]] != "committed":
                self.skipped_prepared += 1
                continue
            if current is not None and row[c["message_id"]] == current[c["message_id"]]:
                queues.append(row[c["queue"]])
                continue
            if current is not None:
                self._message(current, queues)
            current = row
            queues = [row[c["queue"]]]
        if current is not None:
            self._message(current, queues)

    def _message(self, row, queues: list[str]) -> None:
        c = _COL
        if row[c["protocol"]] != "core":
            self.skipped_amqp += 1
            return
        attrs = [("id", row[c["message_id"]]), ("priority", row[c["priority"]]),
                 ("expiration", row[c["expiration"]]), ("timestamp", row[c["timestamp"]]), ("type", row[c["type"]])]
        if row[c["user_id"]] is not None:
            attrs.append(("user-id", row[c["user_id"]]))
        self._w(NL + INDENT * 2 + "<message" + "".join(f' {k}="{self._attr(v)}"' for k, v in attrs) + ">")
        self._w(NL + INDENT * 3 + "<properties>")
        for p in row[c["typed_properties"]] or ():
            attrs = [("name", p["name"]), ("value", p["value"])]
            if p["type"] is not None:
                attrs.append(("type", p["type"]))
            self._empty(4, "property", attrs)
        self._w(NL + INDENT * 3 + "</properties>")
        self._w(NL + INDENT * 3 + "<queues>")
        for q in queues:
            self._empty(4, "queue", (("name", q),))
        self._w(NL + INDENT * 3 + "</queues>")
        body = row[c["body"]]
        if row[c["large"]]:
            self._w(NL + INDENT * 3 + '<body isLarge="true">')
            data = body or b""
            for i in range(0, len(data), LARGE_CHUNK):
                self._w(NL + INDENT * 4 + "<![CDATA[" + b64url(data[i:i + LARGE_CHUNK]) + "]]>")
        else:
            self._w(NL + INDENT * 3 + "<body>")
            self._w(NL + INDENT * 4 + "<![CDATA[" + b64url(body or b"") + "]]>")
        self._w(NL + INDENT * 3 + "</body>")
        self._w(NL + INDENT * 2 + "</message>")
        self.messages_written += 1

    def close(self) -> None:
        self._w(NL + INDENT + "</messages>")
        self._w(NL + "</activemq-journal>")
        self.flush()


def write_document(fh, binding_rows, rows) -> XmlExportWriter:
    """The whole document on ``fh`` (binary): bindings, then messages. Returns the writer (its counts)."""
    w = XmlExportWriter(fh)
    w.bindings(binding_rows)
    w.messages(rows)
    w.close()
    return w
