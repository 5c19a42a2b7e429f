"""Structured logs: one JSON object per line on stderr, so a log pipeline can index them.

Call sites pass structured fields as ``extra={"fields": {...}}``; they become keys of
the line beside ``ts``, ``level``, ``logger`` and ``msg``.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from typing import Any, TextIO

import orjson

__all__ = ["JsonFormatter", "setup_logging"]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for k, v in fields.items():
                doc.setdefault(k, v)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


def setup_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """JSON lines on ``stream`` (stderr) for every logger, at ``level`` and above."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
