"""``amqtool print PATH``: what a store holds, for people (text), programs (json, jsonl) and support
runbooks (``--style artemis``, the lines of ``artemis data print``)."""
from __future__ import annotations

import contextlib

import enum
import sys

import typer

from amqtool.commands.main import app
from amqtool.commands.output import (
    FORMAT_OPTION,
    QUIET_OPTION,
    OutputFormat,
    consistent_read,
    finish,
    guarded,
    progress,
    write_json,
    write_jsonl,
    write_lines,
)
from amqtool.commands.stores import describe, header, stores_at, where
from amqtool.commands.tables import WIDE_OPTION, fold_lines
from amqtool.commands.store_options import (
    ACTIVEMQ_XML_KAHADB_OPTION,
    BROKER_XML_OPTION,
    JDBC_PASSWORD_FILE_OPTION,
    JDBC_TABLE_PREFIX_OPTION,
    JDBC_URL_OPTION,
)
from amqtool.errors import UsageError, Verdict


class Style(str, enum.Enum):
    amqtool = "amqtool"
    artemis = "artemis"


class JournalChoice(str, enum.Enum):
    bindings = "bindings"
    messages = "messages"


@app.command("print")
def print_(
    path: str = typer.Argument(".", help="Broker instance, data directory, journal directory or KahaDB directory."),
    broker_xml: str = BROKER_XML_OPTION,
    activemq_xml: str = ACTIVEMQ_XML_KAHADB_OPTION,
    fmt: OutputFormat = FORMAT_OPTION,
    style: Style = typer.Option(Style.amqtool, "--style", help="Text style: amqtool, or artemis (`artemis data print` lines)."),
    safe: bool = typer.Option(False, "--safe", help="No body bytes: sizes and sha256 only."),
    reclaimed: bool = typer.Option(False, "--reclaimed", help="Also show records left from earlier uses of reused files."),
    ids: list[int] = typer.Option(None, "--id", help="Only this record id (repeatable)."),
    types: list[int] = typer.Option(None, "--type", help="Only this user record type (repeatable)."),
    files: list[str] = typer.Option(None, "--file", help="Only records whose body is in this file name (repeatable)."),
    journal: JournalChoice = typer.Option(None, "--journal", help="Only the bindings or the messages journal."),
    max_pages: int = typer.Option(-1, "--max-pages", help="Paging: at most this many pages per address (-1 all, 0 none)."),
    pins: bool = typer.Option(False, "--pins", help="Why each journal (log) file cannot be reclaimed yet (Artemis: only the pins)."),
    drain: str = typer.Option(None, "--drain", help="With --pins: which files would go if this queue (KahaDB: DEST) were drained."),
    jdbc_url: str = JDBC_URL_OPTION,
    jdbc_password_file: str = JDBC_PASSWORD_FILE_OPTION,
    jdbc_table_prefix: str = JDBC_TABLE_PREFIX_OPTION,
    wide: bool = WIDE_OPTION,
    quiet: bool = QUIET_OPTION,
) -> None:
    """Print a store's live state (and, with --style artemis, every record as `artemis data print` does)."""
    with guarded(fmt):
        from amqtool.units import check_number

        check_number(max_pages, "--max-pages", minimum=0, also=(-1,))
        if _print_jdbc(jdbc_url, jdbc_password_file, jdbc_table_prefix, activemq_xml, broker_xml, fmt, style,
                       safe, quiet, reclaimed=reclaimed, ids=ids, types=types, journal=journal,
                       file_options=bool(files or pins or drain), wide=wide):
            return
        stores = stores_at(path, broker_xml, activemq_xml)
        one = dict(fmt=fmt, style=style, safe=safe, reclaimed=reclaimed, ids=ids, types=types, files=files,
                   journal=journal, max_pages=max_pages, pins=pins, drain=drain, quiet=quiet, wide=wide)
        if len(stores) > 1:
            verdict = _print_several(path, stores, one)
        elif (stores[0].kind != "artemis" or pins or drain or fmt is not OutputFormat.json
              or style is Style.artemis):
            verdict = _print_store(stores[0], **one)
        else:
            # One JSON document, of the store before or after a compaction that switches files meanwhile.
            from amqtool.store import locks
            from amqtool.store.layout import detect

            store = stores[0]
            lock_files = locks.artemis_store_lock_files(store)

            def read():
                again = detect(path, broker_xml, activemq_xml)  # a switch may have renamed every file
                judged = _print_store(again, **one)
                if judged is not Verdict.OK:
                    finish(judged)  # judged on this read (consistent_read keeps the Exit of the read it keeps)

            consistent_read([j.directory for j in store.journals()], read,
                            broker_running=lambda: bool(locks.find_locks(lock_files)))
            verdict = Verdict.OK
        if verdict is not Verdict.OK:
            finish(verdict)


def _print_several(path: str, stores: list, one: dict) -> Verdict:
    """Every store under PATH, each headed by its kind and path (text), as one document with a ``stores``
    list (json), or with each row naming its ``store`` (jsonl); the verdict is the worst."""
    import json
    import os

    fmt = one["fmt"]
    if one["style"] is Style.artemis:
        raise UsageError(f"{len(stores)} stores under {os.path.abspath(path)} ({describe(stores)}): "
                         "--style artemis prints one store; give its path")
    verdict = Verdict.OK
    if fmt is OutputFormat.json:
        sys.stdout.write(f'{{"kind": "several", "path": {json.dumps(os.path.abspath(path))}, "stores": [')
    for i, store in enumerate(stores):
        if fmt is OutputFormat.text:
            write_lines([header(store)])
        elif fmt is OutputFormat.json and i:
            sys.stdout.write(", ")
        verdict = max(verdict, _print_store(store, **one, tag=where(store)))
        if fmt is OutputFormat.text:
            write_lines([""])
    if fmt is OutputFormat.json:
        sys.stdout.write(f'], "verdict": "{verdict.name}"}}\n')
    elif fmt is OutputFormat.text:
        write_lines(fold_lines([f"{len(stores)} stores printed: {describe(stores)}"], wide=one["wide"]))
    return verdict


def _tagged(rows, tag: str | None):
    """Rows of one store among several carry its ``store`` path (KahaDB rows name theirs already)."""
    if tag is None:
        yield from rows
        return
    for row in rows:
        yield row if "store" in row else {"store": tag, **row}


def _print_store(store, *, fmt, style, safe, reclaimed, ids, types, files, journal, max_pages, pins, drain,
                 quiet, wide, tag: str | None = None) -> Verdict:
    """One store on disk printed; its verdict (files Artemis refuses, as verify judges them)."""
    if store.kind == "kahadb":
        return _print_kahadb(store, fmt, safe, pins, drain, quiet, wide)
    if store.kind in ("leveldb", "replicated-leveldb"):
        if drain:
            raise UsageError("--drain applies to KahaDB and Artemis stores")
        return _print_leveldb(store, fmt, safe, pins, quiet, wide)
    if pins or drain:
        return _print_artemis_pins(store, fmt, drain, quiet, wide)
    from amqtool.engines.artemis.journal_print import PrintOptions, iter_json, iter_rows, iter_text
    from amqtool.engines.artemis.verify import total_bytes

    opts = PrintOptions(
        safe=safe,
        reclaimed=reclaimed,
        ids=set(ids) if ids else None,
        user_types=set(types) if types else None,
        files=set(files) if files else None,
        journals={journal.value} if journal else None,
    )
    with progress("reading", total_bytes(store), quiet) as advance, contextlib.ExitStack() as keep:
        # verify's verdict on the very load print shows (amqtool.engines.verdicts): one load per journal.
        # (--style artemis: describe_store reads the files its own way; the verdict is verify's all the same)
        from amqtool.engines.artemis.verify import verify_store
        from amqtool.errors import overall_verdict

        report = verify_store(store, advance, keep=keep)
        verdict = overall_verdict(report.findings)
        loads = report.loads if style is not Style.artemis else None
        if style is Style.artemis:
            if fmt is not OutputFormat.text:
                raise UsageError("--style artemis is a text style; use it without --format json")
            from amqtool.engines.artemis.describe import describe_store

            write_lines(describe_store(store, safe=safe, reclaimed=reclaimed, max_pages=max_pages,
                                       progress=advance))
        elif fmt is OutputFormat.json:
            tail = on_result = None
            if store.paging_dir is not None or store.large_messages_dir is not None:  # paging section
                from amqtool.engines.artemis.paging import PagingJournalView, iter_paging_json

                view = PagingJournalView()  # fed by the journals print loads (each is read once)
                on_result = view.add_journal

                def tail():
                    yield ', "paging": '
                    yield from iter_paging_json(store, safe=safe, max_pages=max_pages, view=view)
            from amqtool.engines.artemis.jms import jms_document

            extra = (lambda: {"jms": jms_document(store)}) if store.jms is not None else None
            write = _document_writer()
            for chunk in iter_json(store, opts, advance, tail=tail, on_result=on_result, verdict=verdict,
                                   extra=extra, raw=write.raw, loads=loads):
                write(chunk)
        elif fmt is OutputFormat.jsonl:
            write_jsonl(_tagged(iter_rows(store, opts, advance, loads=loads), tag))
        else:
            from amqtool.engines.artemis.describe import describe_live_record

            write_lines(fold_lines(iter_text(store, opts, advance, describe=describe_live_record, loads=loads),
                                   wide=wide))
            if store.jms is not None:
                from amqtool.engines.artemis.jms import jms_document, jms_text

                write_lines(fold_lines(jms_text(jms_document(store)), wide=wide))
    return verdict


def _print_kahadb(store, fmt: OutputFormat, safe: bool, pins: bool, drain: str | None, quiet: bool,
                  wide: bool = False) -> Verdict:
    from amqtool.engines import kahadb

    with progress("reading", None, quiet) as advance:
        if fmt is OutputFormat.jsonl and not (pins or drain):
            write_jsonl(kahadb.iter_record_rows(store, safe=safe))
            return Verdict.OK  # the records only: no document, no judgement
        doc = kahadb.print_document(store, safe=safe, records=False, pins=pins or bool(drain), drain=drain,
                                    progress=advance)
    if fmt is OutputFormat.json:
        write_json(doc)
    elif fmt is OutputFormat.jsonl:  # --pins: the pins, not the records
        _write_pins_jsonl(doc, "stores", ("directory", "txStore"), "pins")
    else:
        write_lines(fold_lines(kahadb.render_text(doc), wide=wide))
    return Verdict[doc["verdict"]]  # verify's verdict of the same load, and its exit code


def _print_leveldb(store, fmt: OutputFormat, safe: bool, pins: bool, quiet: bool, wide: bool = False) -> Verdict:
    from amqtool.engines.leveldb import document

    with progress("reading", None, quiet):
        if fmt is OutputFormat.jsonl:
            write_jsonl(document.iter_record_rows(store, safe=safe))
            return Verdict.OK  # the records only: no document, no judgement
        doc = document.print_document(store, safe=safe, pins=pins)
    if fmt is OutputFormat.json:
        write_json(doc)
    else:
        write_lines(fold_lines(document.render_text(doc), wide=wide))
    return Verdict[doc["verdict"]]  # verify's verdict of the same read


def _print_artemis_pins(store, fmt: OutputFormat, drain: str | None, quiet: bool, wide: bool = False) -> Verdict:
    from amqtool.engines.artemis.pins import artemis_pins, render_pins_text
    from amqtool.engines.artemis.verify import total_bytes

    with progress("reading", total_bytes(store), quiet) as advance:
        doc = artemis_pins(store, drain=drain, progress=advance)
    if fmt is OutputFormat.json:
        write_json(doc)
    elif fmt is OutputFormat.jsonl:
        _write_pins_jsonl(doc, "journals", ("journal", "directory"), "files")
    else:
        write_lines(fold_lines(render_pins_text(doc), wide=wide))
    return Verdict[doc["verdict"]]


def _write_pins_jsonl(doc: dict, groups: str, names: tuple[str, ...], files: str) -> None:
    """``--pins --format jsonl``: one line per journal file (``"record": "pin"``, with the names of its
    journal or store), then ``"record": "summary"``: the verdict and, per journal or store, what is not a
    file's line (``collectableNow``, ``drain``)."""
    def rows():
        for g in doc[groups]:
            for f in g.get(files) or ():
                yield {"record": "pin", **{k: g.get(k) for k in names}, **f}
        rest = {k: v for k, v in doc.items() if k != groups}
        rest[groups] = [{k: v for k, v in g.items() if k in names or k in ("collectableNow", "drain")}
                        for g in doc[groups]]
        yield {"record": "summary", **rest}

    write_jsonl(rows())


def _print_jdbc(jdbc_url, password_file, table_prefix, activemq_xml, broker_xml, fmt: OutputFormat, style: Style,
                safe: bool, quiet: bool, *, reclaimed: bool, ids, types, journal, file_options: bool,
                wide: bool = False) -> bool:
    """A database store (``--jdbc-url``, or a configuration naming one): print it and return True; else False."""
    from amqtool.engines.jdbc.resolve import jdbc_store

    store = jdbc_store(jdbc_url, password_file, activemq_xml=activemq_xml, broker_xml=broker_xml,
                       table_prefix=table_prefix)
    if store is None:
        return False
    if file_options or reclaimed:
        raise UsageError("--file, --reclaimed, --pins and --drain apply to stores on disk, not database stores")
    if store.kind == "artemis-jdbc":
        _print_artemis_jdbc(store, fmt, style, safe, quiet, reclaimed, ids, types, journal, wide)
        return True
    if style is Style.artemis:
        raise UsageError("--style artemis applies to Artemis stores")
    from amqtool.engines.jdbc import classic

    with progress("reading", None, quiet) as advance:
        doc = classic.print_document(store, safe=safe, progress=advance)
    if fmt is OutputFormat.json:
        write_json(doc)
    elif fmt is OutputFormat.jsonl:
        write_jsonl(classic.iter_rows(doc))
    else:
        write_lines(fold_lines(classic.render_text(doc), wide=wide))
    verdict = Verdict[doc["verdict"]]
    if verdict is not Verdict.OK:
        finish(verdict)
    return True


def _print_artemis_jdbc(store, fmt, style, safe, quiet, reclaimed, ids, types, journal, wide) -> None:
    from amqtool.engines.artemis.journal_print import PrintOptions
    from amqtool.engines.jdbc import artemis

    opts = PrintOptions(safe=safe, ids=set(ids) if ids else None, user_types=set(types) if types else None,
                        journals={journal.value} if journal else None)
    if style is Style.artemis and fmt is not OutputFormat.text:
        raise UsageError("--style artemis is a text style; use it without --format json")
    with progress("reading", None, quiet) as advance:
        data = artemis.load(store, advance)
    # verify's verdict on the very load print shows, in every style and for --journal too (one rule:
    # amqtool.engines.verdicts): both tables are loaded, since what one proves lost can take the other
    from amqtool.errors import overall_verdict

    findings = artemis.verify_load(store, data)[0]
    verdict = overall_verdict(findings)
    shown = artemis.selected_journals(data, opts.journals)
    if style is Style.artemis:
        write_lines(artemis.describe_store(data, safe=safe))
    elif fmt is OutputFormat.json:
        for chunk in artemis.print_json(store, shown, opts, verdict):
            sys.stdout.write(chunk)
    elif fmt is OutputFormat.jsonl:
        write_jsonl(artemis.iter_rows(shown, opts))
    else:
        write_lines(fold_lines(artemis.iter_text(shown, opts), wide=wide))
    if verdict is not Verdict.OK:
        finish(verdict)


def _document_writer():
    """A writer of a JSON document's chunks to stdout: str chunks as text; with ``raw`` True (stdout is a
    UTF-8 byte stream underneath) bytes chunks straight to the bytes, so the bulk is not decoded and encoded
    again on its way out."""
    import codecs

    out = sys.stdout
    binary = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None) or ""
    try:
        utf8 = codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        utf8 = False
    if binary is None or not utf8:
        def write(chunk):
            out.write(chunk if isinstance(chunk, str) else chunk.decode("utf-8"))

        write.raw = False
        return write
    errors = getattr(out, "errors", None) or "strict"

    def write(chunk):
        binary.write(chunk if isinstance(chunk, bytes) else chunk.encode("utf-8", errors))

    out.flush()  # whatever was written as text goes first
    write.raw = True
    return write
