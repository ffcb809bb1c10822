"""JMS selectors (amqtool/formats/kahadb/selector.py): what a durable subscription is handed of its stored
messages (TopicStorePrefetch.recoverMessage applies the selector at recovery)."""
from __future__ import annotations

import pytest

from amqtool.formats.kahadb.selector import SelectorError, compile_selector


@pytest.mark.parametrize("selector, values, matches", [
    ("color = 'red'", {"color": "red"}, True),
    ("color = 'red'", {"color": "blue"}, False),
    ("color = 'red'", {}, False),  # a missing property is NULL: unknown, no match
    ("NOT color = 'red'", {}, False),  # NOT unknown is unknown
    ("color <> 'red' OR color IS NULL", {}, True),
    ("n > 3 AND n < 10", {"n": 5}, True),
    ("n BETWEEN 1 AND 4", {"n": 5}, False),
    ("n NOT BETWEEN 1 AND 4", {"n": 5}, True),
    ("color IN ('a', 'b')", {"color": "b"}, True),
    ("color NOT IN ('a', 'b')", {"color": "c"}, True),
    ("name LIKE 'ab%' ESCAPE '!'", {"name": "abc"}, True),
    ("name LIKE 'a_c'", {"name": "abbc"}, False),
    ("JMSPriority >= 4 OR y = 1", {"JMSPriority": 4}, True),
    ("(a + 2) * 3 = 9", {"a": 1}, True),
    ("s = 'it''s'", {"s": "it's"}, True),
    ("n > 3", {"n": "5"}, False),  # a string is no number ...
    # ... unless the selector carries the hint the STOMP transport adds (its headers are strings)
    ("convert_string_expressions:n > 3", {"n": "5"}, True),
    ("convert_string_expressions:color = 'purple'", {"color": "red"}, False),
])
def test_selector(selector, values, matches):
    assert compile_selector(selector)(values) is matches


@pytest.mark.parametrize("selector", ["color = ", "color = 'red' garbage", "other_hint:a = 1", "a ~ 1"])
def test_a_selector_not_read_is_refused(selector):
    with pytest.raises(SelectorError):
        compile_selector(selector)
