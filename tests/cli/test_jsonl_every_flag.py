"""Issue 27: ``--format jsonl`` is one JSON object a line for every command with every one of its options
(``bench -f jsonl`` pretty-printed a document; KahaDB ``print --pins -f jsonl`` ignored --pins).

The commands and their options are read from the Typer app (:func:`amqtool.commands.completion.command_tree`,
the tree the shell completion scripts come from), so an option added later is run here too: a flag or a
choice without a case below is run as ``BASE + [flag]`` (each choice in turn), and an option that takes a
free value fails the test until it is given a case in ``CASES``. Each run's stdout must be at least one line
and every line a JSON object (an error, too: its ``"record": "summary"`` line with the verdict)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from amqtool.commands.completion import command_tree
from amqtool.engines.artemis.demo import create_demo
from tests.support import KAHADB, ORACLE, copy_tree

BAD_JDBC = "jdbc:postgresql://127.0.0.1:1/none"  # nothing listens: the error path, quickly


class World:
    """The stores the runs read (made once) and a fresh directory for what a run writes."""

    def __init__(self, root: Path):
        self.root = root
        self.demo = root / "demo"  # an Artemis broker instance: data/ and etc/broker.xml
        create_demo(self.demo, 4 * 1024 * 1024, file_size=1024 * 1024, seed=5)
        (self.demo / "etc").mkdir()
        self.broker_xml = self.demo / "etc" / "broker.xml"
        self.broker_xml.write_text('<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
                                   "</core></configuration>")
        self.kaha = copy_tree(KAHADB / "gc" / "kahadb", root / "kaha")
        self.activemq_xml = root / "activemq.xml"
        self.activemq_xml.write_text(
            '<beans xmlns="http://www.springframework.org/schema/beans"><broker '
            'xmlns="http://activemq.apache.org/schema/core"><persistenceAdapter>'
            f'<kahaDB directory="{self.kaha}"/></persistenceAdapter></broker></beans>')
        self.password_file = root / "password"
        self.password_file.write_text("secret\n")
        self.n = 0

    def fresh(self, name: str) -> Path:
        """A path that does not exist yet, under a directory of its own."""
        self.n += 1
        d = self.root / f"run{self.n}"
        d.mkdir()
        return d / name

    def journal(self, scenario: str = "04a_before_compact") -> Path:
        return copy_tree(ORACLE / scenario / "journal", self.fresh("journal"))

    def kaha_copy(self) -> Path:
        return copy_tree(KAHADB / "tx" / "kahadb", self.fresh("kaha"))


BENCH = ["--writes", "3", "--file-size", "64KiB", "--pattern", "one", "--method", "nio"]

# The command line of each command before the option under test (``w``: the World).
BASE = {
    "print": lambda w: ["print", w.demo],
    "stat": lambda w: ["stat", w.demo],
    "verify": lambda w: ["verify", w.demo],
    "export": lambda w: ["export", w.demo, "-o", w.fresh("out"), "-f", "jsonl", "--engine", "local"],
    "create": lambda w: ["create", w.fresh("new"), "--kind", "bindings"],
    "compact": lambda w: ["compact", w.journal()],
    "recover": lambda w: ["recover", w.journal("03_transactions"), "--dry-run"],
    "bench": lambda w: ["bench", w.fresh("b").parent, *BENCH],
    "bench sync-methods": lambda w: ["bench", "sync-methods", w.fresh("b").parent, "--writes", "3"],
    "check write-cache": lambda w: ["check", "write-cache", w.demo],
    "check disk-space": lambda w: ["check", "disk-space", w.demo],
    "check aio": lambda w: ["check", "aio", w.fresh("a").parent],
    "check all": lambda w: ["check", "all", w.demo, "--probe-seconds", "0"],
    "check db": lambda w: ["check", "db", "--jdbc-url", BAD_JDBC],
}

# How each command asks for JSON lines on stdout (export's -f is the dataset's format: its report is stdout).
JSONL = {"export": ["--report", "jsonl"]}

# Options whose value must be chosen (the whole command line, or several). ``w``: the World.
CASES = {
    ("print", "--broker-xml"): lambda w: [["print", "--broker-xml", w.broker_xml]],
    ("print", "--activemq-xml"): lambda w: [["print", "--activemq-xml", w.activemq_xml]],
    ("print", "--id"): lambda w: [["print", w.demo, "--id", "1"]],
    ("print", "--type"): lambda w: [["print", w.demo, "--type", "45"]],
    ("print", "--file"): lambda w: [["print", w.demo, "--file", "activemq-data-1.amq"]],
    ("print", "--max-pages"): lambda w: [["print", w.demo, "--max-pages", "1"]],
    ("print", "--pins"): lambda w: [["print", w.demo, "--pins"], ["print", w.kaha, "--pins"]],
    ("print", "--drain"): lambda w: [["print", w.demo, "--pins", "--drain", "orders"],
                                     ["print", w.kaha, "--pins", "--drain", "fx.gc.keep"]],
    ("print", "--jdbc-url"): lambda w: [["print", "--jdbc-url", BAD_JDBC]],
    ("print", "--jdbc-password-file"): lambda w: [["print", "--jdbc-url", BAD_JDBC, "--jdbc-password-file",
                                                   w.password_file]],
    ("print", "--jdbc-table-prefix"): lambda w: [["print", "--jdbc-url", BAD_JDBC, "--jdbc-table-prefix", "X"]],
    ("print", "--safe"): lambda w: [["print", w.demo, "--safe"], ["print", w.kaha, "--safe"]],
    ("stat", "--broker-xml"): lambda w: [["stat", "--broker-xml", w.broker_xml]],
    ("stat", "--activemq-xml"): lambda w: [["stat", "--activemq-xml", w.activemq_xml]],
    ("stat", "--metrics-file"): lambda w: [["stat", w.demo, "--metrics-file", w.fresh("m.prom")]],
    ("stat", "--top"): lambda w: [["stat", w.demo, "--top", "2"]],
    ("stat", "--at"): lambda w: [["stat", w.demo, "--at", "1717200000000"]],
    ("stat", "--jdbc-url"): lambda w: [["stat", "--jdbc-url", BAD_JDBC]],
    ("stat", "--jdbc-password-file"): lambda w: [["stat", "--jdbc-url", BAD_JDBC, "--jdbc-password-file",
                                                  w.password_file]],
    ("stat", "--jdbc-table-prefix"): lambda w: [["stat", "--jdbc-url", BAD_JDBC, "--jdbc-table-prefix", "X"]],
    ("verify", "--broker-xml"): lambda w: [["verify", "--broker-xml", w.broker_xml]],
    ("verify", "--activemq-xml"): lambda w: [["verify", "--activemq-xml", w.activemq_xml]],
    ("verify", "--metrics-file"): lambda w: [["verify", w.demo, "--metrics-file", w.fresh("m.prom")]],
    ("verify", "--warning"): lambda w: [["verify", w.demo, "--nagios", "-w", "live_ratio=0.5"]],
    ("verify", "--critical"): lambda w: [["verify", w.demo, "--nagios", "-c", "live_ratio=0.5"]],
    ("verify", "--jdbc-url"): lambda w: [["verify", "--jdbc-url", BAD_JDBC]],
    ("verify", "--jdbc-password-file"): lambda w: [["verify", "--jdbc-url", BAD_JDBC, "--jdbc-password-file",
                                                    w.password_file]],
    ("verify", "--jdbc-table-prefix"): lambda w: [["verify", "--jdbc-url", BAD_JDBC, "--jdbc-table-prefix", "X"]],
    ("export", "--output"): lambda w: [BASE["export"](w)],
    ("export", "--format"): lambda w: [["export", w.demo, "-o", w.fresh("out.xml"), "-f", "xml", "--engine",
                                        "local"],
                                       ["export", w.demo, "-o", w.fresh("out"), "-f", "parquet", "--engine",
                                        "local"]],
    ("export", "--stores-from"): lambda w: [["export", "--stores-from", _stores_list(w), "-o", w.fresh("out"),
                                             "--engine", "local"]],
    ("export", "--queue"): lambda w: [[*BASE["export"](w), "--queue", "orders"]],
    ("export", "--mode"): lambda w: [[*BASE["export"](w), "--mode", "0640"]],
    ("export", "--broker-xml"): lambda w: [["export", "--broker-xml", w.broker_xml, "-o", w.fresh("out"), "-f",
                                            "jsonl", "--engine", "local"]],
    ("export", "--activemq-xml"): lambda w: [["export", "--activemq-xml", w.activemq_xml, "-o", w.fresh("out"),
                                              "-f", "jsonl", "--engine", "local"]],
    ("export", "--jdbc-url"): lambda w: [["export", "--jdbc-url", BAD_JDBC, "-o", w.fresh("out"), "-f", "jsonl",
                                          "--engine", "local"]],
    ("export", "--jdbc-password-file"): lambda w: [["export", "--jdbc-url", BAD_JDBC, "--jdbc-password-file",
                                                    w.password_file, "-o", w.fresh("out"), "--engine", "local"]],
    ("export", "--jdbc-table-prefix"): lambda w: [["export", "--jdbc-url", BAD_JDBC, "--jdbc-table-prefix", "X",
                                                   "-o", w.fresh("out"), "--engine", "local"]],
    ("export", "--report"): lambda w: [],  # how jsonl is asked for: every run has it
    ("create", "--kind"): lambda w: [["create", w.fresh("new"), "--kind", k] for k in ("bindings", "messages")],
    ("create", "--file-size"): lambda w: [["create", w.fresh("new"), "--file-size", "1MiB"]],
    ("create", "--min-files"): lambda w: [["create", w.fresh("new"), "--min-files", "3"]],
    ("create", "--demo"): lambda w: [["create", w.fresh("new"), "--kind", "broker", "--demo", "4MiB"]],
    ("create", "--seed"): lambda w: [["create", w.fresh("new"), "--kind", "broker", "--demo", "4MiB", "--seed", "2"]],
    ("create", "--live-ratio"): lambda w: [["create", w.fresh("new"), "--kind", "broker", "--demo", "4MiB",
                                            "--live-ratio", "0.5"]],
    ("create", "--no-large-messages"): lambda w: [["create", w.fresh("new"), "--kind", "broker", "--demo", "4MiB",
                                                   "--no-large-messages"]],
    ("create", "--no-paging"): lambda w: [["create", w.fresh("new"), "--kind", "broker", "--demo", "4MiB",
                                           "--no-paging"]],
    ("create", "--from"): lambda w: [["create", w.fresh("new"), "--from", w.kaha]],
    ("create", "--large-message-threshold"): lambda w: [["create", w.fresh("new"), "--from", w.kaha,
                                                         "--large-message-threshold", "1KiB"]],
    ("create", "--include-prepared"): lambda w: [["create", w.fresh("new"), "--from", w.kaha_copy(),
                                                  "--include-prepared"]],
    ("create", "--dry-run"): lambda w: [["create", w.fresh("new"), "--from", w.kaha, "--dry-run"]],
    ("create", "--force"): lambda w: [["create", w.fresh("new"), "--from", w.kaha, "--force"]],
    ("compact", "--broker-xml"): lambda w: [["compact", _instance_copy(w), "--broker-xml",
                                             "etc/broker.xml", "--dry-run"]],
    ("compact", "--output"): lambda w: [[*BASE["compact"](w), "-o", w.fresh("out")]],
    ("compact", "--journal"): lambda w: [[*BASE["compact"](w), "--journal", "messages"]],
    ("compact", "--file-size"): lambda w: [[*BASE["compact"](w), "--file-size", "1MiB"]],
    ("compact", "--min-files"): lambda w: [[*BASE["compact"](w), "--min-files", "3"]],
    ("compact", "--pool-files"): lambda w: [[*BASE["compact"](w), "--pool-files", "4"]],
    ("compact", "--compact-min-files"): lambda w: [[*BASE["compact"](w), "--if-needed", "--compact-min-files", "1"]],
    ("compact", "--compact-percentage"): lambda w: [[*BASE["compact"](w), "--if-needed", "--compact-percentage",
                                                     "90"]],
    ("compact", "--live-below"): lambda w: [["compact", w.kaha_copy(), "--if-needed", "--live-below", "90"]],
    ("compact", "--pinned-below"): lambda w: [["compact", w.kaha_copy(), "--if-needed", "--pinned-below", "5"]],
    ("compact", "--metrics-file"): lambda w: [[*BASE["compact"](w), "--metrics-file", w.fresh("m.prom")]],
    ("compact", "--if-needed"): lambda w: [[*BASE["compact"](w), "--if-needed"],
                                           ["compact", w.kaha_copy(), "--if-needed"]],
    ("recover", "--output"): lambda w: [["recover", w.journal("03_transactions"), "-o", w.fresh("out")],
                                        ["recover", w.kaha_copy(), "-o", w.fresh("out")]],
    ("recover", "--broker-xml"): lambda w: [["recover", "--broker-xml", w.broker_xml, "--dry-run", w.demo]],
    ("recover", "--activemq-xml"): lambda w: [["recover", w.kaha, "--activemq-xml", w.activemq_xml, "--dry-run"]],
    ("recover", "--undelete"): lambda w: [["recover", w.journal("02_add_update_delete"), "--dry-run",
                                           "--undelete"]],
    ("recover", "--queue"): lambda w: [["recover", w.journal("02_add_update_delete"), "--dry-run", "--undelete",
                                        "--queue", "q"]],
    ("recover", "--since"): lambda w: [["recover", w.journal("02_add_update_delete"), "--dry-run", "--undelete",
                                        "--since", "2020-01-01T00:00:00"]],
    ("recover", "--until"): lambda w: [["recover", w.journal("02_add_update_delete"), "--dry-run", "--undelete",
                                        "--until", "2100-01-01T00:00:00"]],
    ("bench", "--file-size"): lambda w: [BASE["bench"](w)],
    ("bench", "--block-size"): lambda w: [[*BASE["bench"](w), "--block-size", "8192"]],
    ("bench", "--writes"): lambda w: [BASE["bench"](w)],
    ("bench", "--seconds"): lambda w: [["bench", w.fresh("b").parent, "--seconds", "0.05", "--pattern", "one",
                                        "--method", "nio", "--file-size", "64KiB"]],
    ("bench", "--producers"): lambda w: [[*BASE["bench"](w), "--pattern", "many", "--producers", "2"]],
    ("bench", "--max-io"): lambda w: [[*BASE["bench"](w), "--max-io", "8"]],
    ("bench", "--compat"): lambda w: [["bench", w.fresh("b").parent, "--compat", "perf-journal", "--writes", "3",
                                       "--tries", "1", "--journal-type", "NIO"]],
    ("bench", "--journal-type"): lambda w: [["bench", w.fresh("b").parent, "--compat", "perf-journal", "--writes",
                                             "3", "--tries", "1", "--journal-type", t] for t in ("NIO", "MAPPED")],
    ("bench", "--tries"): lambda w: [["bench", w.fresh("b").parent, "--compat", "perf-journal", "--writes", "3",
                                      "--tries", "2", "--journal-type", "NIO"]],
    ("bench", "--sync-writes"): lambda w: [["bench", w.fresh("b").parent, "--compat", "perf-journal", "--writes",
                                            "3", "--tries", "1", "--journal-type", "NIO", "--sync-writes"]],
    ("bench", "--no-sync"): lambda w: [["bench", w.fresh("b").parent, "--compat", "perf-journal", "--writes", "3",
                                        "--tries", "1", "--journal-type", "NIO", "--no-sync"]],
    ("bench", "--broker-xml"): lambda w: [["bench", w.fresh("b").parent, *BENCH, "--broker-xml", w.broker_xml]],
    ("bench sync-methods", "--seconds"): lambda w: [["bench", "sync-methods", w.fresh("b").parent, "--seconds",
                                                     "0.05"]],
    ("bench sync-methods", "--writes"): lambda w: [BASE["bench sync-methods"](w)],
}
for _sub in ("write-cache", "disk-space", "aio", "all"):
    _c = f"check {_sub}"
    CASES[(_c, "--broker-xml")] = lambda w, c=_c: [[*BASE[c](w), "--broker-xml", w.broker_xml]]
    CASES[(_c, "--activemq-xml")] = lambda w, c=_c: [[*BASE[c](w), "--activemq-xml", w.activemq_xml]]
    CASES[(_c, "--metrics-file")] = lambda w, c=_c: [[*BASE[c](w), "--metrics-file", w.fresh("m.prom")]]
    CASES[(_c, "--warning")] = lambda w, c=_c: [[*BASE[c](w), "--nagios", "-w", "headroom_pct=10"]]
    CASES[(_c, "--critical")] = lambda w, c=_c: [[*BASE[c](w), "--nagios", "-c", "headroom_pct=5"]]
    CASES[(_c, "--max-disk-usage")] = lambda w, c=_c: [[*BASE[c](w), "--max-disk-usage", "95"]]
    CASES[(_c, "--min-disk-free")] = lambda w, c=_c: [[*BASE[c](w), "--min-disk-free", "1GiB"]]
    CASES[(_c, "--journal-max-io")] = lambda w, c=_c: [[*BASE[c](w), "--journal-max-io", "64"]]
    CASES[(_c, "--journal-device-block-size")] = lambda w, c=_c: [[*BASE[c](w), "--journal-device-block-size",
                                                                   "4096"]]
CASES[("check all", "--probe-seconds")] = lambda w: [[*BASE["check all"](w)[:-2], "--probe-seconds", "0.1"]]
CASES[("check db", "--broker-xml")] = lambda w: [["check", "db", "--broker-xml", w.broker_xml]]
CASES[("check db", "--activemq-xml")] = lambda w: [["check", "db", "--activemq-xml", w.activemq_xml]]
CASES[("check db", "--jdbc-url")] = lambda w: [BASE["check db"](w)]
CASES[("check db", "--jdbc-password-file")] = lambda w: [[*BASE["check db"](w), "--jdbc-password-file",
                                                          w.password_file]]
CASES[("check db", "--jdbc-table-prefix")] = lambda w: [[*BASE["check db"](w), "--jdbc-table-prefix", "X"]]
CASES[("check db", "--kind")] = lambda w: [[*BASE["check db"](w), "--kind", k] for k in ("classic", "artemis")]
CASES[("check db", "--metrics-file")] = lambda w: [[*BASE["check db"](w), "--metrics-file", w.fresh("m.prom")]]

# Options that start Spark (a JVM): run in the spark-marked test below, not in the sweep.
SPARK = {("export", "--engine"): lambda w: [[*BASE["export"](w)[:-2], "--engine", "spark", "--master", "local[1]"]],
         ("export", "--master"): lambda w: [[*BASE["export"](w)[:-2], "--engine", "spark", "--master", "local[1]"]],
         ("export", "--ship"): lambda w: [[*BASE["export"](w)[:-2], "--engine", "spark", "--master", "local[1]",
                                           "--no-ship"]],
         ("export", "--jdbc-driver-jar"): lambda w: [["export", "--jdbc-url", BAD_JDBC, "--engine", "spark",
                                                      "--jdbc-driver-jar", "/nonexistent.jar", "-o", w.fresh("out")]],
         ("export", "--jdbc-partitions"): lambda w: [["export", "--jdbc-url", BAD_JDBC, "--engine", "spark",
                                                      "--jdbc-partitions", "2", "-o", w.fresh("out")]]}

SKIP = {("", "--version")}  # the root's --version prints the version, not a document


def _stores_list(w: World) -> Path:
    p = w.fresh("stores.txt")
    p.write_text(f"{w.demo}\n{w.kaha}\n")
    return p


def _instance_copy(w: World) -> Path:
    d = w.fresh("instance")
    shutil.copytree(w.demo, d)
    return d


def _runs():
    """(id, command path, option, marks) for every option of every command, read from the app."""
    out = []
    for node in command_tree():
        if node.subcommands and not node.options:
            continue
        for opt in node.options:
            name = opt.names[0]
            if name == "--help" or (node.path, name) in SKIP:
                continue
            out.append(pytest.param(node.path, name, opt.takes_value, opt.choices,
                                    id=f"{node.path.replace(' ', '-')}{name}",
                                    marks=[pytest.mark.spark] if (node.path, name) in SPARK else []))
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return World(tmp_path_factory.mktemp("jsonl"))


def _command_lines(world: World, path: str, name: str, takes_value: bool, choices) -> list[list]:
    if (path, name) in SPARK:
        return SPARK[(path, name)](world)
    if (path, name) in CASES:
        return CASES[(path, name)](world)
    if name in ("--format", "--quiet", "--wide"):
        return [[*BASE[path](world), *([name] if name != "--format" else [])]]
    if not takes_value:
        return [[*BASE[path](world), name]]
    if choices:
        return [[*BASE[path](world), name, c] for c in choices]
    raise AssertionError(f"`amqtool {path} {name}` takes a value: give it a case in CASES of {__file__}")


@pytest.mark.parametrize("path, name, takes_value, choices", _runs())
def test_every_line_is_one_json_object(world, run_cli, path, name, takes_value, choices):
    assert path in BASE, f"new command `amqtool {path}`: give it a BASE command line in {__file__}"
    for argv in _command_lines(world, path, name, takes_value, choices):
        jsonl = JSONL.get(path, ["-f", "jsonl"])
        code, out, err = run_cli(*argv, *jsonl)
        lines = out.splitlines()
        assert lines, (argv, code, err)
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                raise AssertionError(f"not one JSON object a line: {argv}: {line[:200]!r}") from None
            assert isinstance(row, dict), (argv, line[:200])
        if code != 0 and len(lines) == 1:  # an error or a verdict: the line says so
            assert "verdict" in json.loads(lines[0]), (argv, lines[0][:200])
