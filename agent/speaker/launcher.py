"""The program the agent starts as ExaBGP: ExaBGP 5.0.15's own entry point, patched first.

DOC: ``INTERPRETER launcher.py [--raw-updates] [--unpaced] [--] exabgp server CONF`` checks the
ExaBGP its interpreter imports, installs the patches of `agent.speaker.exabgp_patches` (loaded
from the file next to this one) and runs ``exabgp.application.main.main`` with the arguments
after the word ``exabgp`` (which names the program in ``ps``; it may be left out), exactly as
``INTERPRETER -m exabgp server CONF`` would. It runs inside ExaBGP's interpreter
(possibly PyPy, without the agent installed), so it imports nothing from `agent`; the agent starts
it by file path (`agent.speaker.child.exabgp_argv`).

The patches are written against one ExaBGP release (they replace a few of its methods with
edited copies), so the version must be exactly `EXABGP_VERSION`:

* ``--raw-updates`` on another version: the launcher refuses to start, with one line on stderr
  (``route-agent launcher: ...``) and exit status `EXIT_VERSION` (the agent checks the same
  before starting ExaBGP: `agent.speaker.child.check_exabgp`; the BgpSpeaker setting ``updates: json`` is the fallback);
* otherwise, on another version: one warning line, and ExaBGP runs unpatched.

Options: ``--raw-updates`` hands every received UPDATE to the API process undecoded, as
``raw-update PEER CAPS HEX`` (`exabgp_reading.raw_prefix`, `exabgp_reading.caps_flags`);
``--unpaced`` lifts ExaBGP's API pacing (50 steps, then a sleep, per loop turn). The fixes that
are always on (reading several messages per turn, the header errors, ``notify``, ``teardown``,
next-hop self) are described in `agent.speaker.exabgp_patches` and `agent.speaker.exabgp_reading`.
``--check`` only checks the version (exit 0, or the error line and `EXIT_VERSION`). Diagnostics:
``--stock`` runs ExaBGP unpatched; ``--async-limit N`` and ``--async-budget-ms N`` tune the
unpaced API loop (benchmarks).
"""

from __future__ import annotations

import os
import sys

EXABGP_VERSION = "5.0.15"
EXIT_VERSION = 78  # EX_CONFIG: the installed ExaBGP is not the one the patches are written for
EXIT_USAGE = 64  # EX_USAGE
PREFIX = "route-agent launcher: "

class Options:
    """The launcher's own options; `argv` is what goes on to ExaBGP."""

    def __init__(self) -> None:
        self.raw_updates = False
        self.unpaced = False
        self.stock = False
        self.check = False
        self.async_limit = 0  # 0: bounded by time only
        self.async_budget = 0.01  # seconds of API work per loop turn when unpaced
        self.argv: list[str] = []


def parse_args(args: list[str]) -> Options:
    """Options up to the first argument that is not one of ours (or ``--``); raises ValueError."""
    opts = Options()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg == "--raw-updates":
            opts.raw_updates = True
        elif arg == "--unpaced":
            opts.unpaced = True
        elif arg == "--stock":
            opts.stock = True
        elif arg == "--check":
            opts.check = True
        elif arg in ("--async-limit", "--async-budget-ms"):
            if i + 1 >= len(args) or not args[i + 1].isdigit():
                raise ValueError(f"{arg} needs a whole number")
            value = int(args[i + 1])
            if arg == "--async-limit":
                opts.async_limit = value
            else:
                opts.async_budget = value / 1000
            i += 1
        else:
            break
        i += 1
    opts.argv = args[i:]
    if opts.argv[:1] == ["exabgp"]:
        del opts.argv[0]
    if not opts.argv and not opts.check:
        raise ValueError("nothing to run: expected ExaBGP's arguments (e.g. server CONF)")
    return opts


def version_problem(found: str | None, raw_updates: bool) -> tuple[str, bool] | None:
    """None when `found` is the pinned ExaBGP; else (message, fatal). Fatal in raw mode only."""
    if found == EXABGP_VERSION:
        return None
    what = f"ExaBGP {found}" if found else "no importable ExaBGP"
    if raw_updates:
        return (f"raw UPDATEs need ExaBGP {EXABGP_VERSION} but this interpreter ({sys.executable}) has "
                f"{what}: install exabgp=={EXABGP_VERSION} or set BgpSpeaker updates: json"), True
    return (f"ExaBGP {EXABGP_VERSION} expected, found {what}: running it without the agent's patches "
            "(paced export, no notify command)"), False


def installed_version() -> str | None:
    try:
        from exabgp.version import release
    except Exception:  # noqa: BLE001  (not installed, or broken)
        return None
    return str(release)


def _load_patches():
    """`exabgp_patches.py` from this file's directory, without putting that directory on sys.path."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exabgp_patches.py")
    spec = importlib.util.spec_from_file_location("route_agent_exabgp_patches", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(args: list[str]) -> int:
    # run as a script, Python put this file's directory first on sys.path: ExaBGP must not
    # import the agent's modules (channel, codec, process ...) in place of anything it looks for
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]
    try:
        opts = parse_args(args)
    except ValueError as exc:
        sys.stderr.write(f"{PREFIX}{exc}\n")
        return EXIT_USAGE
    problem = None if opts.stock else version_problem(installed_version(), opts.raw_updates)
    if problem is not None:
        message, fatal = problem
        sys.stderr.write(f"{PREFIX}{message}\n")
        sys.stderr.flush()
        if fatal:
            return EXIT_VERSION
    if opts.check:
        return 0
    import exabgp

    # as `python -m exabgp`: ExaBGP derives its root folder from argv[0]
    sys.argv = [os.path.join(os.path.dirname(exabgp.__file__), "__main__.py"), *opts.argv]
    if problem is None and not opts.stock:
        _load_patches().install(raw_updates=opts.raw_updates, unpaced=opts.unpaced,
                                async_limit=opts.async_limit, async_budget=opts.async_budget)
    from exabgp.application.main import main as exabgp_main

    try:
        return exabgp_main() or 0
    except BrokenPipeError:  # as exabgp/__main__.py
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
