"""Fault injection and the request log of the in-memory API server.

Rules match requests by method, a path regex and optionally a header (so one client of
several can be singled out: a leader cut off from the API server while its rival is not).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["DropRule", "FailRule", "Faults", "LatencyRule", "RequestRecord"]


@dataclass(slots=True)
class _Match:
    method: str | None = None
    path: re.Pattern[str] | None = None
    header: tuple[str, str] | None = None

    def matches(self, request: web.Request) -> bool:
        if self.method and request.method != self.method.upper():
            return False
        if self.path and not self.path.search(request.path):
            return False
        return not self.header or request.headers.get(self.header[0]) == self.header[1]


@dataclass(slots=True)
class FailRule:
    match: _Match
    status: int
    remaining: int  # -1: until cleared
    message: str = ""
    retry_after: float | None = None


@dataclass(slots=True)
class LatencyRule:
    match: _Match
    seconds: float


@dataclass(slots=True)
class DropRule:
    """The next ``remaining`` matching watches end after ``after_events`` events: aborted
    (the connection is cut mid-stream) or closed cleanly."""

    match: _Match
    after_events: int
    remaining: int
    abort: bool = True


@dataclass(frozen=True, slots=True)
class RequestRecord:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    authorization: str
    user_agent: str
    at: float = field(default_factory=time.monotonic)

    @property
    def watch(self) -> bool:
        return self.query.get("watch", "").lower() in ("true", "1")


def _match(method: str | None, path: str | None, header: tuple[str, str] | None) -> _Match:
    return _Match(method, re.compile(path) if path else None, header)


class Faults:
    """What to break, set by a test and read by the server's middleware."""

    def __init__(self) -> None:
        self.fail_rules: list[FailRule] = []
        self.latency_rules: list[LatencyRule] = []
        self.drop_rules: list[DropRule] = []

    def fail(
        self,
        status: int,
        *,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        header: tuple[str, str] | None = None,
        message: str = "",
        retry_after: float | None = None,
    ) -> FailRule:
        """Answer the next ``times`` matching requests (-1: all until cleared) with
        ``status`` and a Status body, instead of handling them."""
        rule = FailRule(_match(method, path, header), status, times, message, retry_after)
        self.fail_rules.append(rule)
        return rule

    def delay(
        self,
        seconds: float,
        *,
        method: str | None = None,
        path: str | None = None,
        header: tuple[str, str] | None = None,
    ) -> LatencyRule:
        """Add latency to every matching request until cleared."""
        rule = LatencyRule(_match(method, path, header), seconds)
        self.latency_rules.append(rule)
        return rule

    def drop_watches(
        self,
        *,
        after_events: int = 0,
        times: int = 1,
        abort: bool = True,
        path: str | None = None,
    ) -> DropRule:
        rule = DropRule(_match("GET", path, None), after_events, times, abort)
        self.drop_rules.append(rule)
        return rule

    def clear(self) -> None:
        self.fail_rules.clear()
        self.latency_rules.clear()
        self.drop_rules.clear()

    def remove(self, rule: FailRule | LatencyRule | DropRule) -> None:
        for rules in (self.fail_rules, self.latency_rules, self.drop_rules):
            if rule in rules:
                rules.remove(rule)  # type: ignore[arg-type]

    # --- used by the server -----------------------------------------------------------

    def latency_for(self, request: web.Request) -> float:
        return sum(r.seconds for r in self.latency_rules if r.match.matches(request))

    def failure_for(self, request: web.Request) -> FailRule | None:
        for rule in self.fail_rules:
            if rule.remaining != 0 and rule.match.matches(request):
                if rule.remaining > 0:
                    rule.remaining -= 1
                return rule
        return None

    def drop_for(self, request: web.Request) -> DropRule | None:
        for rule in self.drop_rules:
            if rule.remaining != 0 and rule.match.matches(request):
                if rule.remaining > 0:
                    rule.remaining -= 1
                return rule
        return None
