"""The real agent against hostile configuration files (issue 12): a deeply nested file and a
truncated (empty) file are rejected on reload; the agent keeps running and the kernel keeps its routes."""

from __future__ import annotations

import re
import signal

from testlab.netns import wait_for
from conftest import static_routes

ROUTES = """\
    - prefix: 192.0.2.0/24
      nextHops: [{gateway: 10.0.0.1}]
    - prefix: 203.0.113.0/24
      blackhole: true
    - prefix: 2001:db8:10::/48
      nextHops: [{gateway: "fd00::1"}]
"""


def _failures(node) -> float:
    m = re.search(r"^route_agent_config_reload_failures_total (\S+)$", node.api("/metrics"), re.M)
    return float(m.group(1)) if m else 0.0


def _nested(levels: int) -> str:
    return "a: " + "[" * levels + "]" * levels + "\n"


def test_nested_and_truncated_config_files_are_rejected_and_routes_stay(node):
    node.write("static.yaml", static_routes("s", ROUTES))
    proc = node.start()
    v4 = node.wait_routes(lambda r: set(r) == {"192.0.2.0/24", "203.0.113.0/24"})
    v6 = node.wait_routes(lambda r: set(r) == {"2001:db8:10::/48"}, family=6)

    def rejected(count: int, what: str) -> None:
        wait_for(lambda: _failures(node) >= count, 10, what=what)
        assert proc.poll() is None, f"agent exited after {what}:\n{node.logtext()}"
        assert "route_agent_config_last_reload_successful 0.0" in node.api("/metrics")
        assert node.routes(4) == v4 and node.routes(6) == v6

    # a ~2 KB file nested 1,000 levels, seen by the file-change poll (it used to end the agent)
    node.write("static.yaml", _nested(1000))
    rejected(1, "a 1,000-level file")
    assert "nested deeper than" in node.logtext()
    # 30,000 levels, by SIGHUP as well (it used to overflow libyaml's C stack)
    node.write("static.yaml", _nested(30000))
    proc.send_signal(signal.SIGHUP)
    rejected(2, "a 30,000-level file")
    # truncated in place, as an editor or `>` does before writing: no objects at all
    node.write("static.yaml", static_routes("s", ROUTES))
    wait_for(lambda: "route_agent_config_last_reload_successful 1.0" in node.api("/metrics"), 10)
    before = _failures(node)
    with open(node.dir / "static.yaml", "w"):
        pass
    rejected(before + 1, "an empty file")
    assert "no configuration objects" in node.logtext()
    node.write("static.yaml", "---\nnull\n---\n")
    rejected(before + 2, "a file of empty documents")
    # and a good configuration still applies afterwards
    node.write("static.yaml", static_routes("s", "    - prefix: 198.51.100.0/24\n      blackhole: true\n"))
    node.wait_routes(lambda r: set(r) == {"198.51.100.0/24"}, timeout=10)
    assert proc.poll() is None
