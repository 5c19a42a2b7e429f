"""Pictures (``--png``) need matplotlib, the ``plot`` extra. Only the commands that draw
import it, here, when they draw: the engine, the planner and every command without
``--png`` run without it (the import contracts in pyproject.toml keep it so)."""

from __future__ import annotations

from typing import Any

from gangplace.cli_exit import UsageError

__all__ = ["PLOT_EXTRA", "PlotUnavailable", "pyplot"]

PLOT_EXTRA = "pip install 'corral[plot]'"


class PlotUnavailable(UsageError):
    """matplotlib is not installed: the one-line message says how to get it."""


def pyplot(flag: str = "--png") -> Any:
    """``matplotlib.pyplot`` drawing to files (no display), or :class:`PlotUnavailable`
    naming ``flag`` and the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(
            f"{flag} needs matplotlib, which is not installed: {PLOT_EXTRA} "
            "(the plot extra; from a checkout: pip install -e '.[plot]')"
        ) from None
    return plt
