"""corral: placeholder replaced below."""

from __future__ import annotations

from .fgd import FgdPolicy

__all__ = ["CorralPolicy"]


class CorralPolicy(FgdPolicy):
    name = "corral"
