"""Log output: the human-readable default, or one JSON object per line for log pipelines.

DOC: ``route-agent --log-format json`` (or ``ROUTE_AGENT_LOG_FORMAT=json``) makes every log
record one line of JSON, as Kubernetes log collectors (Fluent Bit, Vector, Loki's promtail)
expect: ``time`` (UTC, RFC 3339 with milliseconds), ``level``, ``logger``, ``message``, then
``peer``/``prefix``/``family`` when the record carries them (``extra={"peer": ...}``), or, for
the agent's ``peer %s ...`` messages, the peer named first; ``exception`` holds a traceback.
The default stays ``TIME LEVEL LOGGER: MESSAGE``.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS = ("peer", "prefix", "family")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = str(value)
        if ("peer" not in out and isinstance(record.msg, str) and record.msg.startswith("peer %s")
                and isinstance(record.args, tuple) and record.args):
            out["peer"] = str(record.args[0])
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def setup(level: str, fmt: str = "text") -> None:
    """Configure the root logger: `level` by name, `fmt` ``text`` or ``json``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
