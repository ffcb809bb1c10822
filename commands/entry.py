"""The ``amqtool`` console script: SIGTERM/SIGHUP handled from the first instant.

Importing the command line (Typer, Rich, the command modules) takes a few tenths of a second; a signal in
that window used to end the process silently, or (once :func:`amqtool.commands.main.main` had installed its
handler but before a command's guard) with a traceback (issue 26). Until ``main`` takes over, nothing has been
written, so a signal here only needs the one line every interrupted run prints and the same exit code
(128 + the signal number)."""
from __future__ import annotations


def _early(signum, _frame):
    import os
    import signal

    os.write(2, f"amqtool: interrupted ({signal.Signals(signum).name})\n".encode())
    os._exit(128 + signum)


def main() -> int:
    import signal
    import sys

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _early)
    from amqtool.commands.main import main as run

    sys.exit(run())
