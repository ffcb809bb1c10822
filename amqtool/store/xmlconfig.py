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
        raise UsageError(f"refusing {name}: {_refusal(err)}", path=str(path)) from None


def _refusal(err: Exception) -> str:
    """defusedxml's refusal in words (its exceptions print as a Python repr)."""
    from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden

    if isinstance(err, EntitiesForbidden):
        what = f"an external entity ({err.sysid})" if err.sysid else "an entity declaration"
        return f"it declares {what} {err.name!r}, which is never expanded (XML external entities are refused)"
    if isinstance(err, ExternalReferenceForbidden):
        return f"it refers to an external resource ({err.sysid or err.pubid}), which is never fetched"
    if isinstance(err, DTDForbidden):
        return "it has a DTD, which is refused"
    return f"{type(err).__name__}: {err}"


def local_name(tag) -> str:
    """An element's tag without its ``{namespace}`` (comments and processing instructions give "")."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
