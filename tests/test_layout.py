"""The layout rules of the package (issue 11): checked here so that they stay true.

* the shipped wheel holds `agent` only (with its sample config), every module of it imports
  without the test fixtures, and `route-agent` runs from it;
* the product never imports the fixtures (`testlab`), the tests or the benchmarks;
* each package says in its docstring what it owns and what it may import;
* no product module grows past ~400 lines.
(The layers themselves are import-linter contracts in `.importlinter`, run by scripts/test.sh.)
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "agent"
MAX_LINES = 420  # "about 400": a module that needs more is doing two things
FIXTURES = ("testlab", "tests", "bench")


def _modules():
    return sorted(p for p in AGENT.rglob("*.py"))


def test_product_never_imports_the_fixtures():
    bad = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            bad += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in FIXTURES]
    assert bad == []


def test_every_package_says_what_it_owns_and_may_import():
    missing = []
    for init in sorted(AGENT.rglob("__init__.py")):
        if init.parent == AGENT:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if "May import" not in doc:
            missing.append(str(init.relative_to(ROOT)))
    assert missing == []


def test_no_product_module_over_about_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    build_dir_existed = (ROOT / "build").exists()
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
                        "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    if not build_dir_existed:
        shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' scratch space in the tree
    if r.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {r.stderr[-500:]}")
    (whl,) = out.glob("*.whl")
    unpacked = out / "site"
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        z.extractall(unpacked)
    return names, unpacked


def test_wheel_ships_the_agent_only(wheel):
    names, _ = wheel
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"agent"}
    assert "agent/samples/standalone.yaml" in names


def test_route_agent_runs_from_the_wheel_without_the_fixtures(wheel, tmp_path):
    _, site = wheel
    env = dict(os.environ, PYTHONPATH=str(site))
    code = ("import importlib, pkgutil, agent\n"
            f"assert agent.__file__.startswith({str(site)!r}), agent.__file__\n"
            "for m in pkgutil.walk_packages(agent.__path__, 'agent.'):\n"
            "    if m.name != 'agent.__main__':\n"
            "        importlib.import_module(m.name)\n"
            "try:\n    import testlab\nexcept ImportError:\n    pass\nelse:\n    raise SystemExit('testlab importable')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sample = site / "agent" / "samples" / "standalone.yaml"
    r = subprocess.run([sys.executable, "-m", "agent", "validate", str(sample)], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
