"""The state directory of a running agent with a BGP peer is private: 0700, its files 0600."""

from __future__ import annotations

import os
import stat

from testlab.netns import wait_for
from conftest import agent_config, bgp_peer, tor_config


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_state_dir_and_speaker_files_are_private(bgp_lab):
    node = bgp_lab.node
    speaker = node.state / "speaker"
    speaker.mkdir(parents=True)  # as an older version left it: world-readable
    os.chmod(node.state, 0o755)
    os.chmod(speaker, 0o755)
    (speaker / "exabgp.env").write_text("")
    os.chmod(speaker / "exabgp.env", 0o644)
    bgp_lab.bird("tor", tor_config(["192.0.2.0/24"], []))
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra="  importPolicy: acceptAll\n"))
    node.start()
    wait_for(lambda: (speaker / "exabgp.pid").exists(), 20, what="ExaBGP started")
    assert mode(node.state) == 0o700 and mode(speaker) == 0o700
    files = {p.name: mode(p) for p in speaker.iterdir() if p.is_file() and not p.is_symlink()}
    assert {"exabgp.env", "exabgp.pid"} <= set(files)
    assert all(m == 0o600 for m in files.values()), files
