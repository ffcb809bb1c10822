"""JMS message selectors (the SQL-92 subset of the JMS spec, as ActiveMQ's ``SelectorParser`` reads them), enough
to tell which stored messages a durable subscription is handed.

ActiveMQ Classic stores a durable subscription's pending messages unfiltered when it is offline (KahaDB keeps
every topic message for every subscription until it is acknowledged), and applies the selector when it
recovers them for dispatch (``TopicStorePrefetch.recoverMessage``: ``subscription.matches``); a message its
selector does not match is never delivered to it.

:func:`compile_selector` gives a predicate over a message's properties and headers (``JMSType``,
``JMSCorrelationID``, ``JMSPriority``, ``JMSMessageID``, ``JMSTimestamp``, ``JMSDeliveryMode``), or raises
:class:`SelectorError` for what it does not read (the caller then keeps every message, as if no selector).
Supported: identifiers, string, integer, decimal and boolean literals, ``= <> < > <= >=``, ``+ - * /``,
``AND OR NOT``, ``IS [NOT] NULL``, ``[NOT] IN (...)``, ``[NOT] LIKE ... [ESCAPE ...]``, ``[NOT] BETWEEN``,
parentheses; SQL three-valued logic (a missing property is NULL: a comparison with it is unknown, which does
not match).
"""
from __future__ import annotations

import re
from typing import Callable

_TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^']|'')*')
  | (?P<num>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?[lL]?|0[xX][0-9a-fA-F]+)
  | (?P<op><>|<=|>=|=|<|>|\(|\)|,|\+|-|\*|/)
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$.]*)
)""", re.X)
_KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "IN", "LIKE", "ESCAPE", "BETWEEN", "TRUE", "FALSE"}
_HEADERS = {"JMSType": "jms_type", "JMSCorrelationID": "correlation_id", "JMSPriority": "priority",
            "JMSMessageID": "message_id", "JMSTimestamp": "timestamp"}


class SelectorError(ValueError):
    """A selector this module does not read."""


def compile_selector(text: str) -> Callable[[dict], bool]:
    """A predicate ``matches(values)`` for selector ``text``; ``values`` maps identifiers (properties and the
    JMS header names above) to their values (absent: NULL). Raises SelectorError."""
    convert = False
    # SelectorParser's hints before the expression: convert_string_expressions (what the STOMP transport sets,
    # its headers being strings) compares a string with a number as a number
    while True:
        hint, colon, rest = text.partition(":")
        if not colon or not re.fullmatch(r"[a-z_]+", hint.strip()):
            break
        if hint.strip() != "convert_string_expressions":
            raise SelectorError(f"selector hint {hint.strip()!r}")
        convert, text = True, rest
    tokens = _tokenize(text)
    p = _Parser(tokens, convert)
    expr = p.or_()
    if p.i != len(tokens):
        raise SelectorError(f"unexpected {tokens[p.i][1]!r} in selector")
    return lambda values: expr(values) is True


def message_values(msg) -> dict:
    """The identifiers a selector reads from an OpenWire message (amqtool.formats.kahadb.openwire): its
    properties and JMS headers (a JMSDeliveryMode of 'PERSISTENT' or 'NON_PERSISTENT')."""
    values = dict(msg.properties())
    for name, attr in _HEADERS.items():
        v = getattr(msg, attr, None)
        if v is not None:
            values[name] = v
    values["JMSDeliveryMode"] = "PERSISTENT" if msg.persistent else "NON_PERSISTENT"
    return values


def _tokenize(text: str) -> list:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise SelectorError(f"cannot read the selector at {text[pos:pos + 10]!r}")
        pos = m.end()
        kind = m.lastgroup
        v = m.group(kind)
        if kind == "id" and v.upper() in _KEYWORDS:
            out.append(("kw", v.upper()))
        elif kind == "str":
            out.append(("lit", v[1:-1].replace("''", "'")))
        elif kind == "num":
            out.append(("lit", _number(v)))
        else:
            out.append((kind, v))
    return out


def _number(v: str):
    if v[:2] in ("0x", "0X"):
        return int(v, 16)
    if v[-1] in "lL":
        return int(v[:-1])
    if any(c in v for c in ".eE"):
        return float(v)
    return int(v)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _compare(op: str, a, b):
    """SQL comparison: unknown (None) with a NULL; numbers compare as numbers; strings and booleans only for
    (in)equality; values of other types are unequal (ActiveMQ's ComparisonExpression)."""
    if a is None or b is None:
        return None
    if not (_num(a) and _num(b)):
        same = type(a) is type(b)
        if op == "=":
            return same and a == b
        if op == "<>":
            return not (same and a == b)
        return None
    return {"=": a == b, "<>": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]


def _converted(a, b) -> tuple:
    """convert_string_expressions: a string compared with a number is read as a number when it is one."""
    if isinstance(a, str) and _num(b):
        a = _as_number(a, a)
    elif isinstance(b, str) and _num(a):
        b = _as_number(b, b)
    return a, b


def _as_number(text: str, default):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return default


def _and(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _not(a):
    return None if a is None else not a


def _like(value, pattern: str, escape: str | None):
    if value is None:
        return None
    if not isinstance(value, str):
        return False
    rx, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if escape and c == escape and i + 1 < len(pattern):
            rx += re.escape(pattern[i + 1])
            i += 2
            continue
        rx += ".*" if c == "%" else "." if c == "_" else re.escape(c)
        i += 1
    return re.fullmatch(rx, value, re.S) is not None


class _Parser:
    def __init__(self, tokens: list, convert: bool = False):
        self.t = tokens
        self.i = 0
        self.convert = convert

    def peek(self, kind=None, value=None) -> bool:
        if self.i >= len(self.t):
            return False
        k, v = self.t[self.i]
        return (kind is None or k == kind) and (value is None or v == value)

    def take(self, kind=None, value=None):
        if not self.peek(kind, value):
            got = self.t[self.i][1] if self.i < len(self.t) else "the end"
            raise SelectorError(f"expected {value or kind}, got {got!r}")
        self.i += 1
        return self.t[self.i - 1][1]

    def or_(self):
        left = self.and_()
        while self.peek("kw", "OR"):
            self.i += 1
            right = self.and_()
            left = (lambda a, b: lambda v: _or(a(v), b(v)))(left, right)
        return left

    def and_(self):
        left = self.not_()
        while self.peek("kw", "AND"):
            self.i += 1
            right = self.not_()
            left = (lambda a, b: lambda v: _and(a(v), b(v)))(left, right)
        return left

    def not_(self):
        if self.peek("kw", "NOT"):
            self.i += 1
            inner = self.not_()
            return lambda v: _not(inner(v))
        return self.predicate()

    def predicate(self):
        left = self.sum_()
        negate = False
        if self.peek("kw", "NOT") and self.i + 1 < len(self.t) and self.t[self.i + 1][1] in ("IN", "LIKE", "BETWEEN"):
            self.i += 1
            negate = True
        if self.peek("op") and self.t[self.i][1] in ("=", "<>", "<", ">", "<=", ">="):
            op = self.take("op")
            right = self.sum_()
            if self.convert:
                return lambda v: _compare(op, *_converted(left(v), right(v)))
            return lambda v: _compare(op, left(v), right(v))
        if self.peek("kw", "IS"):
            self.i += 1
            neg = bool(self.peek("kw", "NOT")) and self.take("kw", "NOT") == "NOT"
            self.take("kw", "NULL")
            return lambda v: (left(v) is not None) if neg else (left(v) is None)
        if self.peek("kw", "IN"):
            self.i += 1
            self.take("op", "(")
            items = [self.take("lit")]
            while self.peek("op", ","):
                self.i += 1
                items.append(self.take("lit"))
            self.take("op", ")")

            def isin(v):
                x = left(v)
                return None if x is None else (x in items)
            return (lambda v: _not(isin(v))) if negate else isin
        if self.peek("kw", "LIKE"):
            self.i += 1
            pattern = self.take("lit")
            escape = None
            if self.peek("kw", "ESCAPE"):
                self.i += 1
                escape = self.take("lit")
            if not isinstance(pattern, str) or (escape is not None and not isinstance(escape, str)):
                raise SelectorError("LIKE takes string literals")
            like = lambda v: _like(left(v), pattern, escape)  # noqa: E731
            return (lambda v: _not(like(v))) if negate else like
        if self.peek("kw", "BETWEEN"):
            self.i += 1
            lo = self.sum_()
            self.take("kw", "AND")
            hi = self.sum_()
            between = lambda v: _and(_compare(">=", left(v), lo(v)), _compare("<=", left(v), hi(v)))  # noqa: E731
            return (lambda v: _not(between(v))) if negate else between
        if negate:
            raise SelectorError("NOT where IN, LIKE or BETWEEN was expected")
        return left

    def sum_(self):
        left = self.product()
        while self.peek("op") and self.t[self.i][1] in ("+", "-"):
            op = self.take("op")
            right = self.product()
            left = (lambda a, b, o: lambda v: _arith(o, a(v), b(v)))(left, right, op)
        return left

    def product(self):
        left = self.unary()
        while self.peek("op") and self.t[self.i][1] in ("*", "/"):
            op = self.take("op")
            right = self.unary()
            left = (lambda a, b, o: lambda v: _arith(o, a(v), b(v)))(left, right, op)
        return left

    def unary(self):
        if self.peek("op", "-"):
            self.i += 1
            inner = self.unary()
            return lambda v: _arith("-", 0, inner(v))
        if self.peek("op", "+"):
            self.i += 1
            return self.unary()
        return self.primary()

    def primary(self):
        if self.peek("op", "("):
            self.i += 1
            inner = self.or_()
            self.take("op", ")")
            return inner
        if self.peek("lit"):
            value = self.take("lit")
            return lambda v: value
        if self.peek("kw", "TRUE") or self.peek("kw", "FALSE"):
            value = self.take("kw") == "TRUE"
            return lambda v: value
        if self.peek("kw", "NULL"):
            self.i += 1
            return lambda v: None
        name = self.take("id")
        return lambda v: v.get(name)


def _arith(op: str, a, b):
    if a is None or b is None or not _num(a) or not _num(b):
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    return a / b if isinstance(a, float) or isinstance(b, float) else int(a / b)
