"""The one check of a port flag, for every corral command that listens.

A port outside 0-65535 is not refused by the socket layer: it is wrapped (99999 serves on
34463) or refused with a traceback (-1). Both CLIs check their flags here before they
start anything, so a bad port ends in one line and exit 2.
"""

from __future__ import annotations

from gangplace.cli_exit import UsageError

__all__ = ["HIGHEST_PORT", "check_port"]

HIGHEST_PORT = 65535


def check_port(flag: str, value: int) -> int:
    """``value`` if it is a port (0: any free port), else :class:`UsageError` naming the
    flag, the value and what is allowed."""
    if not 0 <= value <= HIGHEST_PORT:
        raise UsageError(
            f"{flag}: {value} is not a port; allowed: 0 (any free port) to {HIGHEST_PORT}"
        )
    return value
