"""Structured logs of the long-running commands (``serve``, ``controller``): one JSON object
per line on stderr.

Callers pass facts as ``extra={"fields": {...}}``; only those, the message and the level
are written: never a request object, never a certificate key.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from typing import Any

import orjson

LOGGER_NAME = "infergate"


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, Any] = {}  # on every entry (see add_fields)

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **self.fields,
        }
        fields = getattr(record, "fields", None)
        if fields:
            entry.update(fields)
        if record.exc_info:
            # Internal errors keep their traceback in the log (never in a response).
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode("utf-8")


def configure(level: str = "info", stream: Any = None) -> logging.Logger:
    """Route the ``infergate`` logger (and aiohttp's errors) to JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(LOGGER_NAME)
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
    for name in ("aiohttp.server", "aiohttp.web"):
        other = logging.getLogger(name)
        other.handlers[:] = [handler]
        other.setLevel(logging.WARNING)
        other.propagate = False
    return logger


def add_fields(fields: dict[str, Any]) -> None:
    """Facts every entry carries from now on (which process of ``serve --processes`` wrote it)."""
    for handler in logging.getLogger(LOGGER_NAME).handlers:
        if isinstance(handler.formatter, JsonFormatter):
            handler.formatter.fields.update(fields)


def get(name: str = "") -> logging.Logger:
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)
