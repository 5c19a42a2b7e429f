"""How every corral command ends: one line on stderr and a documented exit code.

The exit codes (docs/cli.md): 0 done; 1 the work failed (the cluster could not be
read, some evictions failed, a gang does not fit); 2 bad input (a flag, a config, a
dump, a trace or fixture file that cannot be used); 3 the descheduler's Lease was lost
part way through a run. Each command's ``main`` hands its work to :func:`run_command`
with the error types that mean bad input, so no input ever ends in a traceback.

Output cut short by the reader (``gangplace report | head -1``) is not an error: the
command stops quietly with 0, as ``cat`` and ``kubectl`` do under ``head``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TextIO

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_LEASE_LOST",
    "EXIT_OK",
    "TRACEBACK_ENV",
    "UsageError",
    "one_line",
    "run_command",
    "warn",
]


class UsageError(ValueError):
    """Bad input to a command (exit 2): a flag, a config, a dump or a file that cannot be
    used; the message says what to change. Every command raises this one type."""


EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_LEASE_LOST = 0, 1, 2, 3
# Set to 1 to see the traceback of an unexpected error instead of its one line.
TRACEBACK_ENV = "CORRAL_TRACEBACK"
_LONGEST = 600


def one_line(message: object) -> str:
    """``message`` on one line: lines joined with ``; ``, cut at a readable length."""
    text = "; ".join(x.strip() for x in str(message).splitlines() if x.strip())
    return text if len(text) <= _LONGEST else f"{text[:_LONGEST]}... ({len(text)} characters)"


def warn(prog: str, notes: list[str] | tuple[str, ...], err: TextIO | None = None) -> None:
    """Each note as ``PROG: warning: note`` on stderr: input corral used, but not all of."""
    stream = err or sys.stderr
    for n in notes:
        stream.write(f"{prog}: warning: {one_line(n)}\n")


def _stdout_gone() -> None:
    """After a closed pipe, point stdout at /dev/null so the exit-time flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real file behind stdout (a test's buffer)
        pass


def run_command(
    prog: str,
    work: Callable[[], int],
    bad_input: tuple[type[BaseException], ...],
    failed: tuple[type[BaseException], ...] = (),
) -> int:
    """Run ``work`` and end as the module docstring says. ``bad_input`` errors exit 2,
    ``failed`` ones 1, each as ``PROG: message``; anything else is a bug in corral,
    reported on one line with exit 1 (``$CORRAL_TRACEBACK=1`` re-raises it)."""
    try:
        code = work()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _stdout_gone()
        return EXIT_OK
    except bad_input as e:
        print(f"{prog}: {one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except failed as e:
        print(f"{prog}: {one_line(e)}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_FAILED
    except Exception as e:
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        print(
            f"{prog}: internal error: {type(e).__name__}: {one_line(e)} (a bug in corral; "
            f"please report it with the command line; {TRACEBACK_ENV}=1 shows where)",
            file=sys.stderr,
        )
        return EXIT_FAILED
