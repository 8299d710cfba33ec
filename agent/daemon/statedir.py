"""The agent's state directory (--state-dir): private to the agent.

DOC: the state directory holds the generated ExaBGP configuration (it may carry MD5 secrets), its
environment and pid files and the API socket. `prepare_state_dir` creates it with mode 0700 (or
tightens an existing one to 0700), tightens what an older version left inside to 0700/0600, and
sets the process umask to 077, so every file the agent (and its ExaBGP child) creates there from
then on is 0600 and every directory 0700. Called first thing in `Agent.run()`.
"""

from __future__ import annotations

import os
import stat

UMASK = 0o077


def prepare_state_dir(path: str) -> None:
    os.umask(UMASK)
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                continue
            private = stat.S_IMODE(st.st_mode) & 0o700
            if private != stat.S_IMODE(st.st_mode):
                os.chmod(full, private)
