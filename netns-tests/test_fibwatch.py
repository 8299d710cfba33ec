"""The benchmarks' kernel route watcher (testlab/fibwatch.py) against the real kernel: it counts
exactly the routes of its protocol in table main, both families, ignores other protocols, tables
and deletions' echoes, and costs little CPU."""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testlab.fibwatch import Watcher  # noqa: E402
from testlab.netns import add_interface, namespace  # noqa: E402


def _batch(path, lines) -> str:
    with open(path, "w") as f:
        f.writelines(line + "\n" for line in lines)
    return str(path)


def test_watcher_counts_its_protocol_in_both_families(tmp_path):
    n4, n6 = 3000, 1000
    n = n4 + n6
    with namespace("ra-fw-") as ns:
        add_interface(ns, "up0", "10.0.0.254/24", "fd00::fe/64")
        # before the first watcher: 10 of ours already there (its baseline), which count
        subprocess.run(["ip", "-n", ns, "-batch", _batch(tmp_path / "pre", [
            f"route replace 11.255.{i}.0/24 via 10.0.0.1 proto 201" for i in range(10)])], check=True)
        noise = [f"route replace 12.{i >> 8}.{i & 255}.0/24 via 10.0.0.1 proto 12" for i in range(500)]  # another protocol
        noise += [f"route replace 13.{i >> 8}.{i & 255}.0/24 via 10.0.0.1 proto 201 table 100" for i in range(500)]  # another table
        noise += [f"route replace 11.255.{i}.0/24 via 10.0.0.1 proto 201" for i in range(10)]  # ours, unchanged
        ours = [f"route replace 11.{i >> 8}.{i & 255}.0/24 via 10.0.0.1 proto 201" for i in range(n4 - 10)]
        ours += [f"route replace 2a00:{i:x}::/32 via fd00::1 proto 201" for i in range(n6)]
        # all but the last of ours, among noise: the watcher must run into its deadline one short
        watcher = Watcher(ns, n, 201, 2, nice=0)  # (tests may run beside busy loops)
        try:
            subprocess.run(["ip", "-n", ns, "-batch", _batch(tmp_path / "a", noise[:700] + ours[:-1] + noise[700:])],
                           check=True)
            short = watcher.result()
        finally:
            watcher.close()
        # a new watcher (baseline n - 1), then the last route
        watcher = Watcher(ns, n, 201, 30, nice=0)
        try:
            subprocess.run(["ip", "-n", ns, "-batch", _batch(tmp_path / "b", ours[-1:])], check=True)
            done = watcher.result()
        finally:
            watcher.close()
    # counting notifications, the first one never saw more than n - 1 (had it counted the
    # noise it would have reached n, found fewer in its confirming dump and switched methods)
    assert (short["count"], short["dump_count"], short["method"]) == (n - 1, n - 1, "notifications")
    assert (done["count"], done["dump_count"], done["method"]) == (n, n, "notifications")
    assert short["cpu"] < 1.0 and done["cpu"] < 1.0
