"""One size convention (issue 13 item 16): binary units everywhere, and a size the operator typed echoed as
typed beside what it means."""
from __future__ import annotations

from amqtool.units import as_given, binary


def test_binary_units():
    assert [binary(n) for n in (0, 1023, 1024, 10 * 1024**2, 3 * 1024**3 // 2, None)] == \
        ["0 B", "1023 B", "1.0 KiB", "10.0 MiB", "1.5 GiB", "-"]
    assert as_given("1TB", 10**12) == "1TB (931.3 GiB)" and as_given("10.0 MiB", 10 * 1024**2) == "10.0 MiB"


def test_min_disk_free_is_echoed_as_typed(run_json, tmp_path):
    code, doc, _ = run_json("check", "disk-space", tmp_path, "--min-disk-free", "1000GB")
    (f,) = [f for f in doc["findings"] if f["code"].startswith("disk-space") or "min-disk-free" in f["message"]]
    assert "min-disk-free 1000GB (1000.0 GiB)" in f["message"]  # ByteUtil: GB is 1024**3


def test_progress_counts_in_binary_units():
    from rich.progress import Progress

    from amqtool.commands.output import _bytes_column

    column = _bytes_column()
    with Progress(column, disable=True) as bar:
        task = bar.add_task("x", total=3 * 1024**3)
        bar.update(task, completed=512 * 1024**2)
        text = column.render(bar.tasks[0]).plain
    assert text.startswith("512.0 MiB/3.0 GiB") and "GB" not in text
