"""`verify --nagios` and `check --nagios` (issue 19): one status line as the monitoring-plugins guidelines
ask (``SERVICE STATUS - text | 'label'=value[UOM];[warn];[crit];[min];[max] ...``), exit 0/1/2/3, and the
-w/-c ranges in the guidelines' syntax."""
from __future__ import annotations

import re
import shutil

import pytest

from amqtool.engines.artemis.demo import create_demo

STATUS = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}
RANGE = r"@?(?:~|-?[0-9.]+)?:?(?:-?[0-9.]+)?"
PERF = re.compile(r"'(?P<label>[^'=]+)'=(?P<value>-?[0-9.]+)(?P<uom>s|%|B|c)?"
                  rf"(?:;(?P<warn>{RANGE})?(?:;(?P<crit>{RANGE})?(?:;(?P<min>-?[0-9.]+)?(?:;(?P<max>-?[0-9.]+)?)?)?)?)?$")
LINE = re.compile(r"^AMQTOOL (?P<status>OK|WARNING|CRITICAL|UNKNOWN) - (?P<text>[^|\n]+?)(?: \| (?P<perf>[^\n]+))?\n$")


def parse(out: str) -> tuple[str, dict]:
    m = LINE.match(out)
    assert m, out
    perf = {}
    items = re.findall(r"'[^']+'=\S+", m.group("perf") or "")
    assert " ".join(items) == (m.group("perf") or "")  # space-separated items, nothing else
    for item in items:
        p = PERF.match(item)
        assert p, item
        perf[p.group("label")] = p.groupdict()
    return m.group("status"), perf


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("nagios") / "demo"
    create_demo(root, 8 * 1024 * 1024, file_size=1024 * 1024, seed=5)
    return root


def test_verify_ok_line_and_perfdata(demo, run_cli, run_json):
    code, out, _ = run_cli("verify", demo, "--nagios")
    status, perf = parse(out)
    _, doc, _ = run_json("verify", demo)
    assert status == "OK" and code == 0 == STATUS[doc["verdict"]]
    assert float(perf["live_records"]["value"]) == doc["summary"]["liveRecords"]
    assert perf["bytes"]["uom"] == "B" and float(perf["bytes"]["value"]) == doc["summary"]["bytes"]
    assert float(perf["findings_critical"]["value"]) == 0 and perf["findings_critical"]["min"] == "0"
    assert "live_ratio" not in perf  # only when a threshold asks (it costs a stat)


def test_verify_thresholds_on_live_ratio_and_age(demo, run_cli, run_json):
    _, st, _ = run_json("stat", demo)
    ratio = next(j["liveRatio"] for j in st["journals"] if j["journal"] == "messages") * 100
    above, below = int(ratio) + 5, max(0, int(ratio) - 5)
    code, out, _ = run_cli("verify", demo, "--nagios", "-w", f"{above}:", "-c", f"{below}:")
    status, perf = parse(out)
    assert (status, code) == ("WARNING", 1)
    assert perf["live_ratio"]["uom"] == "%" and float(perf["live_ratio"]["value"]) == pytest.approx(ratio, abs=0.01)
    assert perf["live_ratio"]["warn"] == f"{above}:" and perf["live_ratio"]["crit"] == f"{below}:"
    assert perf["live_ratio"]["min"] == "0" and perf["live_ratio"]["max"] == "100"
    code, out, _ = run_cli("verify", demo, "--nagios", "-c", f"live_ratio={above}:")
    assert (parse(out)[0], code) == ("CRITICAL", 2)
    code, out, _ = run_cli("verify", demo, "--nagios", "-w", "oldest_age=~:60")  # demo messages are from 2024
    status, perf = parse(out)
    assert (status, code) == ("WARNING", 1) and perf["oldest_age"]["uom"] == "s"
    code, out, _ = run_cli("verify", demo, "--nagios", "-w", "oldest_age=~:1e12", "-c", "live_ratio=0:")
    assert (parse(out)[0], code) == ("OK", 0)


def test_verify_critical_store_and_errors(demo, run_cli, tmp_path):
    damaged = tmp_path / "demo"
    shutil.copytree(demo, damaged)
    first = sorted((damaged / "data" / "journal").glob("*.amq"))[0]
    with open(first, "r+b") as fh:
        fh.write((99).to_bytes(4, "big"))  # a header version Artemis refuses
    code, out, _ = run_cli("verify", damaged, "--nagios")
    status, perf = parse(out)
    assert (status, code) == ("CRITICAL", 2) and float(perf["findings_critical"]["value"]) >= 1
    code, out, _ = run_cli("verify", tmp_path / "nowhere", "--nagios")
    assert (parse(out)[0], code) == ("UNKNOWN", 3)
    code, out, _ = run_cli("verify", demo, "--nagios", "-w", "nonsense")
    assert (parse(out)[0], code) == ("UNKNOWN", 3)
    code, out, _ = run_cli("verify", demo, "--nagios", "-w", "size=10")
    assert (parse(out)[0], code) == ("UNKNOWN", 3)
    assert run_cli("verify", demo, "-w", "10")[0] == 3  # thresholds without --nagios: usage error
    assert run_cli("verify", demo, "--nagios", "--format", "json")[0] == 3  # one output form at a time
    assert run_cli("check", "disk-space", tmp_path, "--nagios", "--format", "prometheus")[0] == 3


def test_check_disk_space_headroom(run_cli, run_json, tmp_path):
    code, out, _ = run_cli("check", "disk-space", tmp_path, "--nagios")
    status, perf = parse(out)
    _, doc, _ = run_json("check", "disk-space", tmp_path)
    fs = doc["checks"]["filesystems"][0]
    assert code == STATUS[doc["verdict"]] == STATUS[status]
    assert float(perf[f"headroom {tmp_path}"]["value"]) == pytest.approx(fs["headroom"], rel=0.01)  # a live disk
    assert perf[f"headroom_pct {tmp_path}"]["uom"] == "%"
    code, out, _ = run_cli("check", "disk-space", tmp_path, "--nagios", "-w", "@0:100")  # inside: always
    assert (parse(out)[0], code) == ("WARNING", 1) or doc["verdict"] in ("CRITICAL", "UNKNOWN")
    code, out, _ = run_cli("check", "disk-space", tmp_path, "--nagios", "-c", f"headroom={fs['usable'] * 10}:")
    assert (parse(out)[0], code) == ("CRITICAL", 2)


@pytest.mark.parametrize("rng,alerting,quiet", [
    ("10", [-1, 11], [0, 10, 5]),
    ("10:", [9.99, -5], [10, 1e9]),
    ("~:10", [10.5, 100], [-1e9, 10]),
    ("10:20", [9, 21], [10, 15, 20]),
    ("@10:20", [10, 15, 20], [9, 21]),
])
def test_ranges_follow_the_guidelines(rng, alerting, quiet):
    from amqtool.commands.nagios import Range

    r = Range.parse(rng)
    assert all(r.alerts(v) for v in alerting) and not any(r.alerts(v) for v in quiet)
