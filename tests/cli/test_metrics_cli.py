"""`--format prometheus` and `--metrics-file` (issue 19): the exposition parses with the Prometheus client's
own parser, the values equal the JSON documents and the manifests, the file is written whole, and a real
node_exporter (Debian's prometheus-node-exporter) serves it through its textfile collector."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from amqtool.engines.artemis.demo import create_demo
from tests.support import KAHADB


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics") / "demo"
    manifest = create_demo(root, 8 * 1024 * 1024, file_size=1024 * 1024, seed=7)
    return root, manifest


def _samples(text: str) -> dict:
    """{metric name: [(labels, value)]} through prometheus_client.parser."""
    out: dict = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _one(samples, name, **labels):
    hits = [v for lab, v in samples.get(name, []) if all(lab.get(k) == v2 for k, v2 in labels.items())]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


def test_stat_metrics_equal_the_manifest_and_json(demo, run_cli, run_json):
    root, manifest = demo
    code, text, _ = run_cli("stat", root, "--format", "prometheus")
    assert code == 0
    s = _samples(text)
    pending = manifest["expected"]["paging"]["pendingByQueue"]
    for name, n in manifest["expected"]["messageCounts"].items():  # the broker's count: paged ones too
        assert _one(s, "amqtool_queue_messages", queue=name, subscription="") == n + len(pending.get(name, ()))
    _, doc, _ = run_json("stat", root)
    for r in doc["queues"]:
        assert _one(s, "amqtool_queue_bytes", queue=r["name"]) == r["bytes"]
        assert _one(s, "amqtool_queue_paged_messages", queue=r["name"]) == r["paged"]
    for j in doc["journals"]:
        assert _one(s, "amqtool_journal_bytes", journal=j["journal"]) == j["bytes"]
        assert _one(s, "amqtool_journal_live_ratio", journal=j["journal"]) == pytest.approx(j["liveRatio"])
        assert _one(s, "amqtool_journal_reclaimable_bytes", journal=j["journal"], by="compact") == j["compactFrees"]
    assert _one(s, "amqtool_verdict", command="stat") == 0
    ages = [v for _, v in s["amqtool_queue_oldest_message_age_seconds"]]
    assert ages and all(v > 0 for v in ages)


def test_verify_metrics_count_findings_and_carry_the_exit_code(demo, run_cli, run_json, tmp_path):
    root, _ = demo
    damaged = tmp_path / "demo"
    shutil.copytree(root, damaged)
    journal = sorted((damaged / "data" / "journal").glob("*.amq"))[0]
    with open(journal, "r+b") as fh:
        fh.write((99).to_bytes(4, "big"))  # a header version Artemis refuses: CRITICAL
    for path in (root, damaged):
        code, text, _ = run_cli("verify", path, "--format", "prometheus")
        _, doc, _ = run_json("verify", path)
        s = _samples(text)
        assert _one(s, "amqtool_verdict", command="verify") == code == {"OK": 0, "WARNING": 1, "CRITICAL": 2,
                                                                          "UNKNOWN": 3}[doc["verdict"]]
        for sev in ("info", "warning", "critical", "unknown"):
            assert _one(s, "amqtool_findings", severity=sev) == sum(1 for f in doc["findings"] if f["severity"] == sev)
    assert code > 0  # the damaged copy is judged


def test_metrics_file_is_written_whole_beside_normal_output(demo, run_cli, tmp_path):
    root, _ = demo
    target = tmp_path / "collector" / "amqtool.prom"
    target.parent.mkdir()
    code, out, _ = run_cli("verify", root, "--format", "json", "--metrics-file", target)
    assert code == 0 and out.lstrip().startswith("{")  # stdout keeps its format
    assert os.listdir(target.parent) == ["amqtool.prom"]  # no temporary file left behind
    assert _one(_samples(target.read_text()), "amqtool_verdict", command="verify") == 0
    code, _, err = run_cli("verify", root, "--metrics-file", tmp_path / "missing-dir" / "x.prom")
    assert code == 3 and "metrics file" in err


def test_compact_and_check_metrics(demo, run_cli, run_json, tmp_path):
    root, _ = demo
    code, text, _ = run_cli("compact", root, "--dry-run", "--format", "prometheus")
    _, doc, _ = run_json("compact", root, "--dry-run")
    s = _samples(text)
    assert _one(s, "amqtool_compact_duration_seconds") > 0
    for j in doc["journals"]:
        assert _one(s, "amqtool_compact_reclaimed_bytes", journal=j["journal"]) == j["reclaimedBytes"]
    code, text, _ = run_cli("check", "disk-space", tmp_path, "--format", "prometheus")
    _, cdoc, _ = run_json("check", "disk-space", tmp_path)
    s = _samples(text)
    fs = cdoc["checks"]["filesystems"][0]
    # a live disk: other writers move the figure between the two runs
    assert _one(s, "amqtool_filesystem_headroom_bytes", path=str(tmp_path)) == pytest.approx(fs["headroom"], rel=0.01)
    assert _one(s, "amqtool_verdict", command="check") == code


def test_kahadb_stat_metrics(run_cli):
    if not KAHADB.is_dir():
        pytest.skip(f"KahaDB fixtures not found at {KAHADB}")
    code, text, _ = run_cli("stat", KAHADB / "basic" / "kahadb", "--format", "prometheus")
    s = _samples(text)
    assert code == 0
    assert _one(s, "amqtool_queue_messages", queue="fx.orders", subscription="") == 93
    assert _one(s, "amqtool_queue_messages", queue="fx.events", subscription="fx-durable-a:sub-a") == 50


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.integration
def test_node_exporter_serves_the_metrics(demo, run_cli, tmp_path):
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if exe is None:
        pytest.skip("prometheus-node-exporter is not installed (apt-get install prometheus-node-exporter)")
    root, manifest = demo
    collector = tmp_path / "textfile"
    collector.mkdir()
    code, _, _ = run_cli("stat", root, "--format", "json", "--metrics-file", collector / "amqtool.prom")
    assert code == 0
    port = _free_port()
    proc = subprocess.Popen([exe, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                             "--collector.textfile", f"--collector.textfile.directory={collector}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        body = None
        for _ in range(100):
            if proc.poll() is not None:
                pytest.skip(f"node_exporter did not start: {proc.stderr.read().decode(errors='replace')[-300:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                    body = resp.read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert body is not None, "node_exporter never answered"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    s = _samples(body)
    for name, n in manifest["expected"]["messageCounts"].items():
        assert _one(s, "amqtool_queue_messages", queue=name) == n
    # the collector read our file without error
    assert _one(s, "node_textfile_scrape_error") == 0


def test_a_failed_run_still_publishes_unknown(demo, run_cli, tmp_path):
    """Monitoring must see a run that could not check (exit 3) rather than a stale file: the metrics carry
    verdict 3, labelled with the same path a good run uses."""
    target = tmp_path / "amqtool.prom"
    root, _ = demo
    code, _, _ = run_cli("stat", root, "--format", "json", "--metrics-file", target)
    good = _samples(target.read_text())
    assert code == 0 and _one(good, "amqtool_verdict", command="stat", path=str(root)) == 0
    for command in (["stat"], ["verify"], ["compact", "--dry-run"]):
        code, out, err = run_cli(*command, tmp_path / "nowhere", "--metrics-file", target)
        assert code == 3 and "no such file" in err
        s = _samples(target.read_text())
        assert _one(s, "amqtool_verdict", command=command[0], path=str(tmp_path / "nowhere")) == 3
    code, out, _ = run_cli("verify", tmp_path / "nowhere", "--format", "prometheus")
    assert code == 3 and _one(_samples(out), "amqtool_verdict", command="verify") == 3
