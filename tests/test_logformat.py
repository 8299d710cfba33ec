"""`--log-format json`: one JSON object per log record, with the peer when the record names one."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from agent.daemon.logformat import JsonFormatter


def record(msg, *args, exc=None, **extra) -> logging.LogRecord:
    r = logging.LogRecord("agent.speaker", logging.WARNING, __file__, 1, msg, args, exc)
    r.__dict__.update(extra)
    return r


def test_a_record_is_one_line_of_json_with_time_level_logger_message():
    line = JsonFormatter().format(record("speaker dropped %d queued commands", 3))
    assert "\n" not in line
    obj = json.loads(line)
    assert obj["level"] == "warning" and obj["logger"] == "agent.speaker"
    assert obj["message"] == "speaker dropped 3 queued commands"
    assert obj["time"].endswith("Z") and "T" in obj["time"]


def test_the_peer_comes_from_extra_or_from_a_peer_message():
    assert json.loads(JsonFormatter().format(record("peer %s up", "10.0.0.1")))["peer"] == "10.0.0.1"
    obj = json.loads(JsonFormatter().format(record("rejected", peer="fd00::1", prefix="2001:db8::/48")))
    assert (obj["peer"], obj["prefix"]) == ("fd00::1", "2001:db8::/48")
    assert "peer" not in json.loads(JsonFormatter().format(record("sync gate open")))


def test_an_exception_is_kept_inside_the_object():
    try:
        raise ValueError("boom")
    except ValueError:
        obj = json.loads(JsonFormatter().format(record("handling failed", exc=sys.exc_info())))
    assert "ValueError: boom" in obj["exception"]


def test_the_cli_switches_format_and_prints_its_version(capsys, tmp_path):
    from agent.cli import main
    from agent.daemon.logformat import TEXT_FORMAT

    sample = os.path.join(os.path.dirname(os.path.dirname(__file__)), "agent", "samples", "stub-router.yaml")
    try:
        assert main(["--log-format", "json", "validate", sample]) == 0
        capsys.readouterr()
        logging.getLogger("agent.speaker").warning("peer %s down (%s)", "10.0.0.1", "hold timer expired")
        obj = json.loads(capsys.readouterr().err)
        assert (obj["peer"], obj["message"]) == ("10.0.0.1", "peer 10.0.0.1 down (hold timer expired)")
    finally:
        logging.getLogger().handlers[0].setFormatter(logging.Formatter(TEXT_FORMAT))
    v = subprocess.run([sys.executable, "-m", "agent", "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.startswith("route-agent ") and "exabgp 5.0.15" in v.stdout
