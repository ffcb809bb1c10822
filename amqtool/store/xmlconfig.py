"""Parsing the brokers' XML configuration files (``broker.xml``, ``activemq.xml``) safely.

Both go through defusedxml: configuration files come from operators and support tickets, and an entity
expansion or an external DTD must not take the tool down. Every failure is a UsageError naming the file.
"""
from __future__ import annotations

from pathlib import Path

from amqtool.errors import UsageError


def parse_config(path: Path, name: str):
    """The parsed ElementTree of ``path``; ``name`` (``broker.xml``, ``activemq.xml``) words the errors.

    Raises UsageError when the file is missing, unreadable, not well-formed, or refused by defusedxml.
    """
    from defusedxml import ElementTree as ET  # imported here: only commands given a config file pay for it

    try:
        return ET.parse(str(path))
    except FileNotFoundError:
        raise UsageError(f"{name} not found", path=str(path)) from None
    except (OSError, ET.ParseError) as err:
        raise UsageError(f"cannot read {name}: {err}", path=str(path)) from None
    except Exception as err:  # noqa: BLE001 - defusedxml's entity/DTD refusals
        raise UsageError(f"refusing {name}: {err}", path=str(path)) from None


def local_name(tag) -> str:
    """An element's tag without its ``{namespace}`` (comments and processing instructions give "")."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
