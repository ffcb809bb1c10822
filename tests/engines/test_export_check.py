"""``check_messages`` (what verify asks: which messages do not decode) against ``message_batches``, whose
decoding it is without the Arrow batches: the same problems, in the same order, from the C decoder and from
the Python reference, on good and damaged messages and across batch boundaries."""
from __future__ import annotations

import pytest

from amqtool import native
from amqtool.engines.export import columns
from amqtool.engines.export.columns import row
from amqtool.engines.export.local import check_messages, message_batches
from amqtool.engines.export.model import ExportSummary
from amqtool.formats.artemis import primitives as P
from amqtool.formats.artemis.message import TEXT_TYPE, CoreMessage

IMPLS = [pytest.param(False, id="python"),
         pytest.param(True, id="c", marks=pytest.mark.skipif(not native.HAVE_MESSAGE_COLUMNS,
                                                            reason=native.NATIVE_REASON or "no libcrypto"))]


def _messages(n: int = 40) -> list[tuple]:
    out = []
    for i in range(1, n + 1):
        body = CoreMessage.build(message_id=i, address=f"a{i % 3}", body=CoreMessage.text_body(f"text {i}"),
                                 type=TEXT_TYPE, properties=P.TypedProperties.of({"k": (P.INT, i)})).encode()
        if i % 7 == 0:
            body = bytes([body[0] ^ 0xFF]) + body[1:]  # an unknown persister id
        elif i % 11 == 0:
            body = body[:len(body) // 2]  # cut: the encoding runs past the body
        out.append((45, body, i, [row(f"q{k}", k, "ANYCAST") for k in range(1 + i % 2)], ""))
    return out


def _problems(summary: ExportSummary) -> list[tuple]:
    return [(p.message_id, p.message) for p in summary.problems]


@pytest.mark.parametrize("use_native", IMPLS)
@pytest.mark.parametrize("per_batch", [1024, 3])
def test_check_messages_finds_the_problems_message_batches_finds(use_native, per_batch, monkeypatch):
    monkeypatch.setattr(columns, "MAX_MESSAGES", per_batch)
    msgs = _messages()
    want = ExportSummary("verify", "artemis")
    for _ in message_batches(iter(msgs), safe=True, large=None, summary=want, use_native=use_native):
        pass
    got = ExportSummary("verify", "artemis")
    check_messages(iter(msgs), safe=True, large=None, summary=got, use_native=use_native)
    assert _problems(got) == _problems(want)
    assert got.problem_count == want.problem_count
    # the damaged ones, and only they
    assert sorted({m for m, _ in _problems(got)}) == [7, 11, 14, 21, 22, 28, 33, 35]
