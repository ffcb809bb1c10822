"""Every command has a man page that names each of its options (the CLI and man/ kept in step), read from
the same command tree the shell completion scripts are generated from."""
from __future__ import annotations

from amqtool.commands.completion import command_tree
from tests.support import REPO


def test_every_option_is_in_its_man_page():
    missing = []
    for node in command_tree():
        if not node.path:
            continue
        page = REPO / "man" / f"amqtool-{node.path.split()[0]}.1"
        assert page.is_file(), f"no man page for {node.path}"
        text = page.read_text().replace("\\-", "-")
        missing += [f"{node.path} {o.names[0]}" for o in node.options
                    if o.names[0] != "--help" and o.names[0] not in text]
    assert missing == []
    top = (REPO / "man" / "amqtool.1").read_text()
    assert all(f"amqtool-{n.path}" in top for n in command_tree() if n.path and " " not in n.path)
