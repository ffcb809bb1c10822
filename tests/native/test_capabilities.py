"""The AIO and io_uring probes run on first use, not when amqtool.native is imported."""
from __future__ import annotations

import subprocess
import sys

from amqtool import native


def test_probes_are_lazy_and_cached():
    code = (
        "import amqtool.engines.artemis.load, amqtool.native as n\n"
        "before = (n.aio_capability.cache_info().currsize, n.io_uring_capability.cache_info().currsize)\n"
        "flags = (n.HAVE_AIO, n.AIO_REASON, n.HAVE_IO_URING, n.IO_URING_REASON, n.HAVE_AIO)\n"
        "after = n.aio_capability.cache_info()\n"
        "print(before, after.currsize, after.hits, [type(f).__name__ for f in flags])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["(0,", "0)", "1", "2", "['bool',", "'str',", "'bool',", "'str',", "'bool']"]


def test_flags_match_the_probes_and_unknown_names_fail():
    assert (native.HAVE_AIO, native.AIO_REASON) == native.aio_capability()
    assert (native.HAVE_IO_URING, native.IO_URING_REASON) == native.io_uring_capability()
    assert native.HAVE_AIO or native.AIO_REASON  # a refusal always says why
    try:
        native.HAVE_NOTHING  # noqa: B018
    except AttributeError as err:
        assert "HAVE_NOTHING" in str(err)
    else:
        raise AssertionError("unknown attribute did not raise")


def test_switched_off_by_the_environment():
    code = "import amqtool.native as n; print(n.HAVE_AIO, n.AIO_REASON)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"AMQTOOL_NO_AIO": "1", "PATH": "/usr/bin:/bin"}).stdout
    assert out.strip() == "False disabled by AMQTOOL_NO_AIO=1"
