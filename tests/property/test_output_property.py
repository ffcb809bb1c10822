"""The output rule's path relations (issue 26): an output is refused exactly when it is, contains or lies
inside an input, however the two paths are spelled (symlinks, `..`, a name that merely shares a prefix)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqtool.errors import UsageError
from amqtool.store import output

# where the output goes, relative to base/a/store (the input)
RELATIONS = {
    "same": ("store", True),
    "parent": (".", True),
    "grandparent": ("..", True),
    "child": ("store/data", True),
    "grandchild-new": ("store/data/new/x", True),
    "file-inside": ("store/data/f.amq", True),
    "sibling": ("other", False),
    "prefix-sibling": ("store2", False),
    "cousin": ("../b/out", False),
    "new-beside": ("new", False),
}


def _tree(base: Path) -> Path:
    store = base / "a" / "store"
    (store / "data").mkdir(parents=True)
    (store / "data" / "f.amq").write_bytes(b"x")
    (base / "a" / "other").mkdir()
    (base / "a" / "store2").mkdir()
    (base / "b").mkdir()
    (base / "link-a").symlink_to(base / "a")
    (base / "link-store").symlink_to(store)
    return store


@settings(max_examples=150, deadline=None)
@given(relation=st.sampled_from(sorted(RELATIONS)), out_via=st.sampled_from(["plain", "link-a", "dotdot"]),
       in_via=st.sampled_from(["plain", "link-store", "link-a"]), force=st.booleans())
def test_refused_exactly_when_related(relation, out_via, in_via, force):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        store = _tree(base)
        rel, related = RELATIONS[relation]
        a = {"plain": base / "a", "link-a": base / "link-a", "dotdot": base / "b" / ".." / "a"}[out_via]
        out = a / rel
        inp = {"plain": store, "link-store": base / "link-store", "link-a": base / "link-a" / "store"}[in_via]
        before = sorted(str(p.relative_to(base)) for p in base.rglob("*"))
        if related:
            with pytest.raises(UsageError) as err:
                output.check(out, output.EXPORT_DIR, inputs=[inp], force=force)
            assert "the input" in str(err.value)
        else:
            try:
                output.check(out, output.EXPORT_DIR, inputs=[inp], force=force)
            except UsageError as err:  # an unrelated directory that exists: refused for what it is, not where
                assert os.path.isdir(out) and "the input" not in str(err)
        assert sorted(str(p.relative_to(base)) for p in base.rglob("*")) == before  # a check writes nothing


def test_a_second_path_to_the_same_inode_is_the_input(tmp_path):
    """Identity by (st_dev, st_ino), not by name: a hard-linked file input, and a directory reached by two
    names (what a bind mount gives, without needing root)."""
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "alias").symlink_to(store, target_is_directory=True)
    with pytest.raises(UsageError):
        output.check(tmp_path / "alias" / "x", output.STORE, inputs=[store])
    f = tmp_path / "in.xml"
    f.write_text("<x/>")
    os.link(f, tmp_path / "hard.xml")
    with pytest.raises(UsageError):
        output.check(tmp_path / "hard.xml", output.STORE, inputs=[f])
