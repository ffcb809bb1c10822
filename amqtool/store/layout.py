"""Finding stores on disk: what kind of store a path holds, and where its parts are.

A store path may be a broker instance, its data directory, or one journal directory (DESIGN.md). The kind
is detected from the files, never from names alone: a directory of ``*.bindings`` files is a bindings
journal, ``*.amq`` files a message journal, ``db-N.log``/``db.data`` a KahaDB store, and so on.
``--broker-xml`` overrides discovery with the directories the broker itself uses.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from amqtool.errors import AmqtoolError, UnknownStoreError
from amqtool.store import kahadb_layout
from amqtool.store.brokerxml import BrokerSettings, find_broker_xml, read_broker_xml
from amqtool.store.kahadb_layout import KahaDBStore
from amqtool.store.leveldb_layout import LevelDBStore


@dataclass(frozen=True)
class JournalSpec:
    """The naming of one Artemis journal (JournalStorageManager: prefix, extension, fixed sizes)."""

    kind: str  # "bindings" | "messages" | "jms"
    prefix: str
    extension: str
    default_file_size: int
    min_files: int

    def file_name(self, file_id: int) -> str:
        return f"{self.prefix}-{file_id}.{self.extension}"


BINDINGS = JournalSpec("bindings", "activemq-bindings", "bindings", 1024 * 1024, 2)
MESSAGES = JournalSpec("messages", "activemq-data", "amq", 10 * 1024 * 1024, 2)
# Artemis 1.x's JMS journal (JMSJournalStorageManagerImpl): in the bindings directory, kept by upgraded brokers.
JMS = JournalSpec("jms", "activemq-jms", "jms", 1024 * 1024, 2)
JOURNAL_SPECS = (BINDINGS, MESSAGES)

CONTROL_FILE = "journal-rename-control.ctr"


@dataclass
class JournalDir:
    """One Artemis journal directory and its naming."""

    spec: JournalSpec
    directory: Path

    @property
    def kind(self) -> str:
        return self.spec.kind

    def listing_error(self, err: OSError) -> UnknownStoreError:
        """The error (exit 3: could not check) of a journal directory that cannot be listed, naming it and,
        for mode bits, the permission: without its files the live state is unknown (issue 25, case 5)."""
        if err.errno in (errno.EACCES, errno.EPERM):
            return UnknownStoreError(
                f"cannot list the {self.kind} journal directory: permission denied for this user (uid "
                f"{os.geteuid()}); run as the broker's user or root", path=str(self.directory))
        return UnknownStoreError(f"cannot list the {self.kind} journal directory: {err.strerror}",
                                 path=str(self.directory))

    def journal_files(self) -> list[Path]:
        """Files ending in ``.<ext>`` (not ``.cmp``/``.tmp``/``.bkp``), in directory order."""
        suffix = "." + self.spec.extension
        try:
            names = os.listdir(self.directory)
        except OSError as err:
            raise self.listing_error(err) from None
        return sorted(self.directory / n for n in names if n.endswith(suffix) and (self.directory / n).is_file())


@dataclass
class ArtemisStore:
    """An Artemis broker store: any of its parts may be absent."""

    root: Path
    bindings: JournalDir | None = None
    messages: JournalDir | None = None
    paging_dir: Path | None = None
    large_messages_dir: Path | None = None
    settings: BrokerSettings | None = None
    kind: str = "artemis"
    jms: JournalDir | None = None  # a 1.x JMS journal beside the bindings journal
    given: Path | None = None  # the path it was found from (detect): a writer's output must stay out of it

    def journals(self) -> list[JournalDir]:
        """The journals the 2.x broker loads (bindings, messages); the 1.x JMS journal is :attr:`jms`."""
        return [j for j in (self.bindings, self.messages) if j is not None]

    def find_jms(self, directory: Path | None) -> None:
        """Note the 1.x JMS journal when ``directory`` (the bindings location) holds one."""
        if self.jms is None and directory is not None and _has_files(directory, JMS.extension):
            self.jms = JournalDir(JMS, directory)


Store = ArtemisStore | KahaDBStore | LevelDBStore

def _has_files(directory: Path, ext: str) -> bool:
    try:
        return any(n.endswith("." + ext) for n in os.listdir(directory))
    except OSError:
        return False


def _unlistable(directory: Path) -> bool:
    """A directory that exists but cannot be listed by this user (mode bits, no CAP_DAC_OVERRIDE): it is
    still the journal its name says, to be reported as unreadable (exit 3), never passed over as absent
    (which would judge the store without it: issue 25, case 5)."""
    try:
        os.listdir(directory)
    except PermissionError:
        return True
    except OSError:
        return False
    return False


def _journal_dir(directory: Path) -> JournalDir | None:
    for spec in JOURNAL_SPECS + (JMS,):
        if _has_files(directory, spec.extension):
            return JournalDir(spec, directory)
    return None


def _artemis_from_settings(settings: BrokerSettings) -> ArtemisStore:
    store = ArtemisStore(root=settings.instance_dir or Path("."), settings=settings)
    if settings.bindings_dir and settings.bindings_dir.is_dir():
        store.bindings = JournalDir(BINDINGS, settings.bindings_dir)
        store.find_jms(settings.bindings_dir)
    if settings.journal_dir and settings.journal_dir.is_dir():
        store.messages = JournalDir(MESSAGES, settings.journal_dir)
    if settings.paging_dir and settings.paging_dir.is_dir():
        store.paging_dir = settings.paging_dir
    if settings.large_messages_dir and settings.large_messages_dir.is_dir():
        store.large_messages_dir = settings.large_messages_dir
    return store


def _artemis_data_dir(data: Path) -> ArtemisStore | None:
    store = ArtemisStore(root=data)
    for name, spec in (("bindings", BINDINGS), ("journal", MESSAGES)):
        d = data / name
        if d.is_dir() and (_has_files(d, spec.extension) or _unlistable(d)):
            if spec is BINDINGS:
                store.bindings = JournalDir(spec, d)
            else:
                store.messages = JournalDir(spec, d)
    store.find_jms(data / "bindings" if (data / "bindings").is_dir() else None)
    for name in ("paging",):
        if (data / name).is_dir():
            store.paging_dir = data / name
    for name in ("large-messages", "largemessages"):
        if (data / name).is_dir():
            store.large_messages_dir = data / name
            break
    if store.bindings or store.messages or store.jms:
        return store
    return None


def detect(path: str | os.PathLike, broker_xml: str | None = None, activemq_xml: str | None = None) -> Store:
    """Detect the store at ``path`` (remembered as the store's ``given``).

    Raises UnknownStoreError (exit 3) when nothing recognisable is there.
    """
    store = _detect(path, broker_xml, activemq_xml)
    if not broker_xml and not activemq_xml:
        store.given = Path(path)
    return store


def _detect(path: str | os.PathLike, broker_xml: str | None = None, activemq_xml: str | None = None) -> Store:
    if broker_xml:
        return _artemis_from_settings(read_broker_xml(broker_xml))
    if activemq_xml:

        return kahadb_layout.from_activemq_xml(Path(activemq_xml))
    p = Path(path)
    try:
        os.stat(p)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnknownStoreError("too many levels of symbolic links (a symlink loop)", path=str(p)) from None
        if err.errno in (errno.EACCES, errno.EPERM):
            raise UnknownStoreError("permission denied", path=str(p)) from None
        raise UnknownStoreError("no such file or directory", path=str(p)) from None
    if not p.is_dir():
        raise UnknownStoreError("not a directory (give a broker instance, data directory or journal directory)",
                                path=str(p))
    if not os.access(p, os.R_OK | os.X_OK):
        raise UnknownStoreError("permission denied", path=str(p))

    # A broker instance with its configuration.
    xml = find_broker_xml(p)
    if xml is not None:
        return _artemis_from_settings(read_broker_xml(xml))

    # One journal directory.
    jd = _journal_dir(p)
    if jd is not None:
        store = ArtemisStore(root=p)
        if jd.spec is BINDINGS:
            store.bindings = jd
            store.find_jms(p)
        elif jd.spec is JMS:
            store.jms = jd
        else:
            store.messages = jd
        # Siblings of a journal directory in a data directory (so large messages can be checked).
        parent = _artemis_data_dir(p.parent)
        if parent is not None:
            store.paging_dir = parent.paging_dir
            store.large_messages_dir = parent.large_messages_dir
        return store

    # A data directory, or an instance without etc/broker.xml.
    for data in (p, p / "data"):
        store = _artemis_data_dir(data)
        if store is not None:
            return store

    # ActiveMQ Classic.

    kstore = kahadb_layout.detect_kahadb(p)
    if kstore is not None:
        return kstore
    from amqtool.store.leveldb_layout import detect_leveldb

    lstore = detect_leveldb(p)
    if lstore is not None:
        return lstore
    try:
        empty = not os.listdir(p)
    except OSError:
        empty = False
    if empty:
        raise UnknownStoreError("it is empty: no Artemis journal, KahaDB or LevelDB store found here", path=str(p))
    raise UnknownStoreError("no Artemis journal, KahaDB or LevelDB store found here", path=str(p))


def _artemis_at(p: Path) -> ArtemisStore | None:
    """The Artemis store of a broker instance or data directory at ``p`` (not a lone journal directory), or
    None."""
    xml = find_broker_xml(p)
    if xml is not None:
        return _artemis_from_settings(read_broker_xml(xml))
    for data in (p, p / "data"):
        store = _artemis_data_dir(data)
        if store is not None:
            return store
    return None


def _store_dirs(store: Store) -> list[Path]:
    if isinstance(store, ArtemisStore):
        dirs = [j.directory for j in store.journals()] + [d for d in (store.paging_dir, store.large_messages_dir)
                                                          if d is not None]
        return [store.root, *dirs]
    return [store.root, *store.directories]


def detect_all(path: str | os.PathLike) -> list[Store]:
    """Every store under ``path``: the one :func:`detect` finds, the store of the other kind at the same
    place (an instance holding ``data/`` and ``kahadb/``), and the stores of its sub-directories that are
    not part of one already found (a directory holding ``artemis/`` and ``kahadb/``). A command that reads
    checks them all, so a second store is never passed over in silence; one that writes asks which.

    Raises as :func:`detect` does when there is nothing at all."""
    first = detect(path)
    p = Path(path)
    found: list[Store] = [first]

    def covered(c: Path) -> bool:
        c = c.resolve()
        for s in found:
            for d in _store_dirs(s):
                d = Path(d).resolve()
                if c == d or d in c.parents or c in d.parents:
                    return True
        return False

    if not isinstance(first, ArtemisStore) or first.root.resolve() in (p.resolve(), (p / "data").resolve()):
        other = kahadb_layout.detect_kahadb(p) if isinstance(first, ArtemisStore) else _artemis_at(p)
        if other is not None and not covered(other.root):
            found.append(other)
    try:
        children = sorted(n for n in os.listdir(p) if not n.startswith("."))
    except OSError:
        children = []
    for n in children:
        c = p / n
        if not c.is_dir() or covered(c):
            continue
        try:
            store = _artemis_at(c) or kahadb_layout.detect_kahadb(c)
        except AmqtoolError:  # a sub-directory that is not a readable store is not the operator's target
            continue
        if store is not None and not covered(store.root):
            found.append(store)
    return found
