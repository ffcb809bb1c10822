"""The one doorway to the C extension ``amqtool._native``, with pure-Python fallbacks.

(The bench work extends this module with the timed write loops and capability flags.)
"""
from __future__ import annotations

import os

from amqtool.formats.artemis.records import scan_records_py

try:
    if os.environ.get("AMQTOOL_NO_NATIVE") == "1":
        raise ImportError("disabled by AMQTOOL_NO_NATIVE=1")
    from amqtool import _native  # type: ignore[attr-defined]
except ImportError:
    _native = None

HAVE_NATIVE = _native is not None

scan_records = getattr(_native, "scan_records", None) or scan_records_py
