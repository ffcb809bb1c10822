"""print's C formatter for the live array (amqtool._native.live_json) writes the very text the Python path
writes (record_json + json.dumps): every fixture journal, safe and with bodies, bodies of every length modulo 3
(base64 padding), transactions whose entries point back into earlier files, and a file that shrank after
the load (both read what is there now). Runs are cut up front (live_run) and formatted on threads: small
windows make many runs, each must end where live_json ends it."""
from __future__ import annotations

import json
import os

import pytest

from amqtool import native
from amqtool.engines.artemis.journal_print import PrintOptions, _fast_live_chunks, _fast_live_possible, record_json
from amqtool.engines.artemis.load import load_journal
from amqtool.formats.artemis import records as R
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.native.test_loader import FIXTURE_DIRS, _write_journal

pytestmark = pytest.mark.skipif(not native.HAVE_LIVE_JSON, reason="C extension or libcrypto SHA256 not available")


def _python_text(result, safe):
    out = []
    first = True
    for rec in result.live:
        out.append(("\n  " if first else ",\n  ") + json.dumps(record_json(result, rec, safe), ensure_ascii=False))
        first = False
    return "".join(out)


def _check(journal):
    with open_journal(journal) as opened:
        result = load_journal(opened)
        for safe in (True, False):
            opts = PrintOptions(safe=safe)
            assert _fast_live_possible(result, opts)
            assert "".join(_fast_live_chunks(result, opts)) == _python_text(result, safe)
            # raw: the same text as UTF-8 bytes (print writes them to stdout's byte stream)
            assert b"".join(_fast_live_chunks(result, opts, raw=True)) == _python_text(result, safe).encode()
        return result


@pytest.mark.parametrize("journal_dir", FIXTURE_DIRS, ids=lambda p: "/".join(p.parts[-4:]))
def test_fast_live_json_equals_python_on_fixture(journal_dir):
    for journal in detect(journal_dir).journals():
        _check(journal)


def test_filters_keep_the_python_path():
    journal = detect(FIXTURE_DIRS[0]).journals()[0]
    with open_journal(journal) as opened:
        result = load_journal(opened)
        assert not _fast_live_possible(result, PrintOptions(ids={1}))
        assert not _fast_live_possible(result, PrintOptions(user_types={45}))
        assert not _fast_live_possible(result, PrintOptions(files={"x"}))
        assert not _fast_live_possible(load_journal(opened, use_native=False), PrintOptions())


def _generated(tmp_path):
    # 3 files; bodies of 0..8 bytes (all base64 paddings), every user type byte, negative compact counts and
    # ids; tx 7 spans files 1-3 and commits in file 3, so its entries point back two files.
    f1 = [R.Record(R.ADD, 0, -3, record_id=-5, user_record_type=255, body=b"")]
    f1 += [R.Record(R.ADD, 0, i % 5, record_id=i, user_record_type=i, body=os.urandom(i % 9)) for i in range(1, 256)]
    f1 += [R.Record(R.ADD_TX, 0, 0, tx_id=7, record_id=1000, user_record_type=45, body=b"first file")]
    f2 = [R.Record(R.UPDATE, 0, 1, record_id=i, user_record_type=i, body=os.urandom(i % 7)) for i in range(1, 50)]
    f2 += [R.Record(R.ADD_TX, 0, 0, tx_id=7, record_id=1001, user_record_type=31, body=b"second")]
    f3 = [R.Record(R.ADD_TX, 0, 0, tx_id=7, record_id=1002, user_record_type=30, body=b"third"),
          R.Record(R.COMMIT, 0, 0, tx_id=7, number_of_records=1),
          R.Record(R.ADD, 0, 0, record_id=2**63 - 1, user_record_type=32, body=b"\xff" * 100)]
    return _write_journal(tmp_path, [f1, f2, f3], 2, 8192, {}, [])


def test_fast_live_json_on_generated_journal(tmp_path):
    d = _generated(tmp_path)
    result = _check(detect(d).journals()[0])
    fis = [r.file_index for r in result.live]
    assert fis != sorted(fis)  # the committed tx's entries point back to earlier files


def test_file_shrunk_after_load_reads_what_is_there(tmp_path):
    d = _generated(tmp_path)
    journal = detect(d).journals()[0]
    with open_journal(journal) as opened:
        result = load_journal(opened)
        first = sorted(d.iterdir())[0]
        os.truncate(first, 2000)  # bodies after 2000 now read short or empty
        for safe in (True, False):
            fast = "".join(_fast_live_chunks(result, PrintOptions(safe=safe)))
            assert fast == _python_text(result, safe)


def test_runs_cut_in_small_windows_equal_the_python_text(tmp_path, monkeypatch):
    """Windows of 64 bytes: a run per few entries, cut by live_run, each reading its own window on a
    formatting thread, in order (and the queue summary's tally from the same windows, in live order)."""
    import amqtool.engines.artemis.journal_print as jp

    monkeypatch.setattr(jp, "WINDOW", 64)
    journal = detect(_generated(tmp_path)).journals()[0]
    with open_journal(journal) as opened:
        result = load_journal(opened)
        runs = list(_fast_live_chunks(result, PrintOptions(safe=False)))
        assert len(runs) > 5
        assert "".join(runs) == _python_text(result, False)
