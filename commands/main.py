"""The ``amqtool`` entry point: one Typer app, one module per subcommand.

Usage errors exit 3 (UNKNOWN), not Click's 2: monitoring plugins and cron wrappers read 2 as CRITICAL.
"""
from __future__ import annotations

import sys

import typer

from amqtool import __version__

app = typer.Typer(
    name="amqtool",
    help="Storage administration for ActiveMQ Artemis and ActiveMQ Classic message stores.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Shell completion (no start-up cost, scripts generated at build time): bash loads "
    "<prefix>/share/bash-completion/completions/amqtool by itself (or source it), zsh finds "
    "<prefix>/share/zsh/site-functions/_amqtool on its fpath, fish reads "
    "<prefix>/share/fish/vendor_completions.d/amqtool.fish; python -m amqtool.commands.completion "
    "bash|zsh|fish prints one.",
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"amqtool {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Print, verify, create, compact and export broker journals; check disks; benchmark journal writes."""


def _register() -> None:
    # Each module adds its command(s) to `app`. Imported here, not at the top, so that one module's
    # heavy import never slows another command's start.
    from amqtool.commands import (  # noqa: F401
        bench_cmd,
        check_cmd,
        compact_cmd,
        create_cmd,
        export_cmd,
        print_cmd,
        recover_cmd,
        stat_cmd,
        verify_cmd,
    )


_register()


# Typer's usage-error class, reached through a public name: Typer (0.2x) vendors Click, so the class is
# not importable from `click` and its module path is private.
_UsageError = typer.BadParameter.__mro__[1]


_signalled: list[int] = []  # SIGTERM/SIGHUP received during this run


def _raise_terminated(signum, _frame):
    from amqtool.commands.output import Terminated

    _signalled.append(signum)
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code. Usage errors (Click's 2) become UNKNOWN (3). SIGTERM and SIGHUP
    clean up as Ctrl-C does (temporary outputs removed) and exit 128 + the signal number."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    _signalled.clear()
    from amqtool.commands.output import Terminated, interrupted

    saved: dict = {}
    try:
        try:
            # installed inside the try: a signal between the two calls is already ours to report
            for s in (signal.SIGTERM, signal.SIGHUP):
                saved[s] = signal.signal(s, _raise_terminated)
            rv = _main(argv)
            if rv == 130:
                # Typer turns an interrupt that escapes a command (before its guard: imports, option parsing)
                # into a silent exit 130: say it, with the right signal's code
                return interrupted(Terminated(_signalled[-1]) if _signalled else KeyboardInterrupt())
            return rv
        except KeyboardInterrupt as err:
            # a signal between installing the handlers and the command's own guard (imports, option parsing):
            # nothing was written yet; one line, never a traceback (issue 26)
            return interrupted(err)
    finally:
        # a signal arriving while the handlers are put back finds the run over: its outcome stands
        while saved:
            try:
                s, handler = next(iter(saved.items()))
                signal.signal(s, handler)
                del saved[s]
            except KeyboardInterrupt:
                continue


def _notice(line: str) -> None:
    sys.stderr.write(f"amqtool: {line}\n")


def _main(argv: list[str] | None) -> int:
    from amqtool import native
    from amqtool.store import output

    output.notice = _notice  # the writers' notes (a dead run's leftovers removed) go to stderr

    if not native.HAVE_NATIVE:  # once per run: every decoder then runs its (much slower) Python reference
        sys.stderr.write(f"amqtool: note: running without the C extension ({native.NATIVE_REASON}); "
                         "the pure-Python paths are slower\n")
    try:
        rv = app(args=argv, prog_name="amqtool", standalone_mode=False)
    except _UsageError as err:
        sys.stderr.write(f"amqtool: usage error: {err.format_message()}\n")
        ctx = getattr(err, "ctx", None)
        if ctx is not None:
            sys.stderr.write(f"Try '{ctx.command_path} --help'.\n")
        return 3
    except typer.Abort as err:
        from amqtool.commands.output import interrupted

        # Click turns a KeyboardInterrupt (our SIGTERM/SIGHUP too) during parsing into Abort
        cause = err.__cause__ if isinstance(err.__cause__, KeyboardInterrupt) else KeyboardInterrupt()
        return interrupted(cause)
    except KeyboardInterrupt as err:
        from amqtool.commands.output import interrupted

        return interrupted(err)
    except typer.Exit as ex:
        return ex.exit_code
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
