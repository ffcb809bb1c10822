"""What each timed write loop of amqtool._native puts on disk (bytes and length), and its contract.

The file is pre-filled with 0xEE here (not zeros) so that untouched bytes and O_DIRECT zero padding can be
told apart. No timing is asserted.
"""
from __future__ import annotations

import array
import errno
import os

import pytest

from amqtool import native

pytestmark = pytest.mark.skipif(not native.HAVE_NATIVE, reason=f"C extension not built: {native.NATIVE_REASON}")

FILL = 0xEE
BLOCK = bytes((i * 7 + 1) % 251 for i in range(1000))  # 1000 bytes: an unaligned block


@pytest.fixture
def target(tmp_path):
    def make(size: int):
        p = tmp_path / "bench.dat"
        p.write_bytes(bytes([FILL]) * size)
        return p

    return make


def _slots(data: bytes, unit: int, count: int):
    return [data[i * unit:(i + 1) * unit] for i in range(count)]


def test_nio_unaligned_block_and_tail(target):
    p = target(10_500)  # 10 slots of 1000 bytes + a 500-byte tail no write reaches
    ops, elapsed, lat = native.nio_run(str(p), BLOCK, 10_500, 25, sync=1)
    data = p.read_bytes()
    assert ops == 25 and len(lat) == 25 * 8
    assert len(data) == 10_500
    assert all(s == BLOCK for s in _slots(data, 1000, 10))
    assert data[10_000:] == bytes([FILL]) * 500


def test_nio_batched_groups_wrap_before_the_end(target):
    p = target(10_000)
    ops, _, lat = native.nio_run(str(p), BLOCK, 10_000, 12, batch=3, coalesce=True, sync=2)
    assert ops == 12
    assert len(array.array("Q", lat)) == 4  # one latency per sync, four syncs
    data = p.read_bytes()
    # groups land on slots 0-2, 3-5, 6-8; the fourth no longer fits (9+3 > 10) and goes back to slot 0
    assert all(s == BLOCK for s in _slots(data, 1000, 9))
    assert data[9000:] == bytes([FILL]) * 1000


def test_nio_last_partial_batch_and_separate_writes(target):
    p = target(10_000)
    ops, _, lat = native.nio_run(str(p), BLOCK, 10_000, 5, batch=4, coalesce=False, sync=0)
    assert ops == 5 and len(lat) == 2 * 8
    data = p.read_bytes()
    assert all(s == BLOCK for s in _slots(data, 1000, 5))  # 4 writes, then a group of one on slot 4
    assert data[5000:] == bytes([FILL]) * 5000


def test_nio_o_direct_pads_to_alignment(target):
    p = target(3 * 4096 + 100)
    ops, _, _ = native.nio_run(str(p), BLOCK, 3 * 4096 + 100, 3, oflags=os.O_DIRECT | os.O_DSYNC, sync=0, align=4096)
    assert ops == 3
    data = p.read_bytes()
    assert len(data) == 3 * 4096 + 100
    for s in _slots(data, 4096, 3):
        assert s == BLOCK + bytes(4096 - 1000)
    assert data[3 * 4096:] == bytes([FILL]) * 100


def test_nio_and_mapped_sync_latencies_one_per_sync_within_the_op(target):
    """sync_lat=True: a fourth item timing the sync call alone, one entry per op, each no longer than its op."""
    for run, kw in ((native.nio_run, {"coalesce": True, "sync": 1}), (native.mapped_run, {})):
        p = target(10_000)
        res = run(str(p), BLOCK, 10_000, 12, batch=3, sync_lat=True, **kw)
        assert len(res) == 4 and res[0] == 12
        op, sync = array.array("Q", res[2]), array.array("Q", res[3])
        assert len(op) == len(sync) == 4
        assert all(0 < s <= o for s, o in zip(sync, op))
        assert all(s == BLOCK for s in _slots(p.read_bytes(), 1000, 9))
        assert len(run(str(p), BLOCK, 10_000, 3, **kw)) == 3  # without it: the three items as before


@pytest.mark.parametrize("depth", [1, 4])
def test_aio_pads_blocks_and_leaves_tail(target, depth):
    if not native.HAVE_AIO:
        pytest.skip(native.AIO_REASON)
    size = 5 * 4096 + 300
    p = target(size)
    ops, _, lat = native.aio_run(str(p), BLOCK, size, 7, depth=depth, align=4096)
    assert ops == 7 and len(lat) == 7 * 8
    data = p.read_bytes()
    assert len(data) == size
    for s in _slots(data, 4096, 5):
        assert s == BLOCK + bytes(4096 - 1000)
    assert data[5 * 4096:] == bytes([FILL]) * 300


def test_aio_aligned_block_is_written_as_is(target):
    if not native.HAVE_AIO:
        pytest.skip(native.AIO_REASON)
    block = bytes(range(256)) * 32  # 8192 bytes, a multiple of the alignment
    p = target(8192 * 2)
    native.aio_run(str(p), block, 8192 * 2, 2, depth=2)
    assert p.read_bytes() == block * 2


@pytest.mark.parametrize("batch", [1, 3])
def test_mapped_copies_blocks_and_keeps_length(target, batch):
    p = target(10_500)
    ops, _, lat = native.mapped_run(str(p), BLOCK, 10_500, 9, batch=batch)
    assert ops == 9 and len(lat) == (9 // batch) * 8
    data = p.read_bytes()
    assert len(data) == 10_500
    assert all(s == BLOCK for s in _slots(data, 1000, 9))
    assert data[9000:] == bytes([FILL]) * 1500


@pytest.mark.parametrize("depth,sync", [(1, False), (4, False), (2, True)])
def test_uring_pads_blocks(target, depth, sync):
    if not native.HAVE_IO_URING:
        pytest.skip(native.IO_URING_REASON)
    size = 4 * 4096 + 10
    p = target(size)
    ops, _, lat = native.uring_run(str(p), BLOCK, size, 6, depth=depth, sync=sync)
    assert ops == 6 and len(lat) == 6 * 8
    data = p.read_bytes()
    for s in _slots(data, 4096, 4):
        assert s == BLOCK + bytes(4096 - 1000)
    assert data[4 * 4096:] == bytes([FILL]) * 10


def test_stop_flag_and_progress_counter(target):
    p = target(8192)
    ctl = array.array("q", [0, 1])  # stop requested before the first write
    ops, _, lat = native.nio_run(str(p), BLOCK, 8192, 100, ctl=ctl)
    assert ops == 0 and lat == b""
    ctl = array.array("q", [0, 0])
    ops, _, _ = native.mapped_run(str(p), BLOCK, 8192, 17, ctl=ctl)
    assert ops == 17 and ctl[0] == 17


def test_duration_bound_run_ends(target):
    p = target(8192)
    ops, elapsed, lat = native.nio_run(str(p), BLOCK, 8192, 10**9, sync=0, duration_ns=20_000_000)
    assert 0 < ops < 10**9 and len(lat) == ops * 8


def test_errors_are_oserrors_with_errno(tmp_path, target):
    with pytest.raises(OSError) as exc:
        native.nio_run(str(tmp_path / "missing"), BLOCK, 8192, 1)
    assert exc.value.errno == errno.ENOENT
    p = target(1000)
    with pytest.raises(ValueError):
        native.nio_run(str(p), BLOCK, 999, 1)  # region holds no write
    with pytest.raises(ValueError):
        native.aio_run(str(p), BLOCK, 1 << 20, 1, align=1000)  # not a power of two


def test_o_direct_refused_on_ramfs(ramfs):
    p = ramfs / "f"
    p.write_bytes(bytes(8192))
    for fn in (native.aio_run, native.uring_run):
        with pytest.raises(OSError) as exc:
            fn(str(p), BLOCK, 8192, 1)
        assert exc.value.errno == errno.EINVAL and "O_DIRECT" in str(exc.value)
    assert native.nio_run(str(p), BLOCK, 8192, 2)[0] == 2  # buffered writes still work
