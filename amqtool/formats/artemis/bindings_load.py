"""What the broker's load of its bindings journal decodes, and which bodies make that decode throw.

``AbstractJournalStorageManager.loadBindingJournal`` walks every live bindings record and switches on its user
record type: the types of :data:`LOAD_TYPES` are decoded (queue and address bindings, their statuses, the ID
counter, groupings, address and security settings, diverts, bridges, users, roles, key-value pairs,
connectors); any other type is only logged (``invalidRecordType``) and skipped. What a decode throws is
rethrown as a RuntimeException out of the load: the broker does not start.

``decode_user_record(..., journal="bindings")`` takes this view. For most types the codecs of userrecords.py
fail exactly where the Java decode does (a read past the body). Three types are kept opaque there (their
text is not what ``data print`` needs), so :func:`check_load` bounds them from below as the Java decode reads
them:

* 25 ADDRESS_SETTING_RECORD: ``PersistedAddressSetting.decode`` reads the address match, then
  ``AddressSettings.decode``, which retries once in its "compatible" form (two policy strings fewer) before
  it gives up; both forms read :data:`ADDRESS_SETTINGS_MIN` fields of at least one byte each (a nullable
  field's flag byte, two routing type bytes) before their optional tail.
* 28 BRIDGE_RECORD: ``BridgeConfiguration.decode`` reads 26 fields of at least one byte each (nullable
  strings, booleans, longs, ints; the routing type byte; the transformer's flag) and the static connector
  count (i32) before its optional tail: :data:`BRIDGE_MIN` bytes.
* 51 CONNECTOR_RECORD: ``PersistedConnector.decode`` reads two Strings (name, url).
* 52 ADDRESS_SETTING_RECORD_JSON: ``AddressSettings.fromJSON`` parses its JSON text as an object.
"""
from __future__ import annotations

import json

from amqtool.errors import FormatError

# the user record types loadBindingJournal decodes (JournalRecordIds names)
LOAD_TYPES = frozenset({20, 21, 22, 24, 25, 26, 27, 28, 44, 46, 47, 48, 50, 51, 52})

ADDRESS_SETTINGS_MIN = 33  # the compatible form's fields before ``if (buffer.readableBytes() > 0)``
BRIDGE_MIN = 26 + 4


def check_load(user_record_type: int, record) -> None:
    """Raise FormatError when the decoded ``record`` (of a type in :data:`LOAD_TYPES`) is one whose Java
    decode at load throws although the codec kept it (the opaque parts of types 25, 28, 51 and 52)."""
    from amqtool.formats.artemis.primitives import Reader

    if user_record_type == 25 and len(record.setting) < ADDRESS_SETTINGS_MIN:
        raise FormatError(f"address settings of {len(record.setting)} bytes: AddressSettings.decode reads at "
                          f"least {ADDRESS_SETTINGS_MIN}")
    if user_record_type == 28 and len(record.data) < BRIDGE_MIN:
        raise FormatError(f"bridge configuration of {len(record.data)} bytes: BridgeConfiguration.decode reads "
                          f"at least {BRIDGE_MIN}")
    if user_record_type == 51:
        r = Reader(record.data)
        r.string("connector name")
        r.string("connector url")
    if user_record_type == 52:
        try:
            parsed = json.loads(record.json)
        except (ValueError, RecursionError) as err:  # (RecursionError: nesting deeper than the parser goes)
            raise FormatError(f"address settings JSON does not parse: {type(err).__name__}") from None
        if not isinstance(parsed, dict):
            raise FormatError("address settings JSON is not an object")
