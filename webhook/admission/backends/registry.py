"""Every backend by the name the config gives it (``backend:``), and the one made for a
config: the only place that chooses between them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from webhook.admission.backends.coscheduling import Coscheduling
from webhook.admission.backends.dialect import Dialect
from webhook.admission.backends.kai import Kai
from webhook.admission.backends.kubernetes import Kubernetes
from webhook.admission.backends.kueue import Kueue
from webhook.admission.backends.volcano import Volcano
from webhook.admission.backends.yunikorn import YuniKorn

if TYPE_CHECKING:
    from webhook.admission.native_gangs import Served

__all__ = ["BACKENDS", "dialect_for"]

BACKENDS: Final[dict[str, type[Dialect]]] = {
    b.name: b for b in (Volcano, Coscheduling, YuniKorn, Kueue, Kubernetes, Kai)
}

# The backend made for each name and what the API server serves: admit() asks for it on
# every request, and a backend holds nothing else.
_MADE: dict[tuple[str, Served | None], Dialect] = {}


def dialect_for(name: str, served: Served | None = None) -> Dialect:
    """The backend called ``name`` (the config's ``backend``, checked at load), made once;
    ``served``: what the API server serves (:mod:`webhook.served`), which the backends
    write for."""
    made = _MADE.get((name, served))
    if made is None:
        if len(_MADE) > 16:
            _MADE.clear()
        made = _MADE[(name, served)] = BACKENDS[name](served)
    return made
