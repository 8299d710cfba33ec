"""Hostile configuration input (issue 12): whatever a file holds, loading it ends in a `Config` or
a `ConfigError` naming the file and, where there is one, the line; it never raises anything else,
never crashes the interpreter, never blocks and never builds an exponential structure."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.config import loader, yamldoc
from agent.config.loader import ConfigError, load_path, load_text, validate_main

ROOT = Path(__file__).resolve().parent.parent
PEER = ("apiVersion: routeagent.io/v1alpha1\nkind: StaticRoutes\nmetadata: {name: s}\n"
        "spec: {routes: [{prefix: 10.0.0.0/24, blackhole: true}]}\n")


def _nested(levels: int) -> str:
    return "a: " + "[" * levels + "]" * levels + "\n"


def _only(exc: ConfigError):
    assert len(exc.problems) == 1, exc.problems
    return exc.problems[0]


def test_a_file_nested_1000_levels_is_a_problem_not_a_recursion_error(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(PEER + "---\n" + _nested(1000))
    assert cfg.stat().st_size < 3000
    with pytest.raises(ConfigError) as info:
        load_path(cfg)
    p = _only(info.value)
    assert (p.file, p.line) == (str(cfg), 6)
    assert f"nested deeper than {yamldoc.MAX_DEPTH} levels" in p.message


def test_a_file_nested_30000_levels_does_not_crash_the_interpreter(tmp_path):
    """The old loader overflowed libyaml's C stack here (SIGSEGV): run it in a child process."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(_nested(30000))
    code = ("import sys; from agent.config.loader import load_path, ConfigError\n"
            "try:\n    load_path(sys.argv[1])\nexcept ConfigError as e:\n    print(e)\n")
    run = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True,
                         timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "nested deeper than" in run.stdout


def test_nesting_up_to_the_bound_is_still_yaml():
    with pytest.raises(ConfigError) as info:
        load_text(_nested(yamldoc.MAX_DEPTH - 1), "cfg.yaml")
    assert all("Field required" in p.message for p in info.value.problems)  # parsed, then refused


def test_billion_laughs_is_refused_before_anything_is_built():
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    with pytest.raises(ConfigError) as info:
        load_text("\n".join(lines) + "\n", "lol.yaml")
    p = _only(info.value)
    assert "more than" in p.message and "aliases expanded" in p.message and p.line is not None


def test_an_alias_deep_inside_its_own_anchor_or_nesting_through_aliases_is_refused():
    with pytest.raises(ConfigError, match="recursive structure"):
        load_text("a: &a [1, *a]\n", "rec.yaml")
    deep = "a: &x " + "[" * 40 + "]" * 40 + "\nb: " + "[" * 30 + "*x" + "]" * 30 + "\n"
    with pytest.raises(ConfigError, match="through alias"):
        load_text(deep, "deep.yaml")


def test_a_too_large_file_is_refused_before_it_is_read(tmp_path):
    cfg = tmp_path / "big.yaml"
    with cfg.open("w") as f:
        f.write(PEER)
        f.write("#" + "x" * (yamldoc.MAX_CHARS + 10) + "\n")
    with pytest.raises(ConfigError) as info:
        load_path(cfg)
    assert "larger than" in _only(info.value).message


def test_a_fifo_as_configuration_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "cfg.yaml"
    os.mkfifo(fifo)
    result: list[BaseException | None] = []

    def load():
        try:
            load_path(fifo)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            result.append(exc)
        else:
            result.append(None)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(5)
    if t.is_alive():  # the old loader blocks in open(): give it a writer and an EOF, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(5)
        pytest.fail("loading a FIFO blocked")
    assert isinstance(result[0], ConfigError) and "not a regular file" in str(result[0])


HOSTILE = [
    "a: " + "9" * 5000,  # int() refuses more than 4300 digits (ValueError)
    "!!python/object/apply:os.system ['true']",
    "? [a, b]\n: c\n",  # unhashable key
    "? {a: 1}\n: 2\n",
    "a: !!binary '%%%'\n",
    "a: !!timestamp 2001-99-99\n",
    "a: !!float abc\n",
    "a: !!int abc\n",
    "- !!set {a, b}\n- !!omap [a]\n",
    "%YAML 9.9\n---\na: 1\n",
    "\x00\x01",
    "a: *nothing\n",
    "&a a: &a b\n",
    "{a: 1, a: 2}",
    "apiVersion: routeagent.io/v1alpha1\nkind: StaticRoutes\nmetadata: {name: [1]}\nspec: {routes: [[[]]]}\n",
    "apiVersion: routeagent.io/v1alpha1\nkind: BgpPeer\nmetadata: {name: x}\nspec: {peerAddress: !!binary AAAA}\n",
    "apiVersion: [1]\nkind: {a: b}\nmetadata: 7\n",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_only_ever_raises_config_error(text):
    with pytest.raises(ConfigError):
        load_text(text, "h.yaml")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("[]{}:-,&*!?|>'\"#%@` \n\tab01.~")), max_size=200))
def test_random_yaml_like_text_only_ever_gives_config_or_config_error(text):
    try:
        load_text(text, "r.yaml")
    except ConfigError as exc:
        assert exc.problems and all(p.file == "r.yaml" for p in exc.problems)


def test_an_unexpected_exception_anywhere_in_loading_becomes_a_problem(monkeypatch, tmp_path):
    def boom(text):
        raise RecursionError("maximum recursion depth exceeded")
        yield  # a generator, like the real one

    monkeypatch.setattr(loader, "documents", boom)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(PEER)
    with pytest.raises(ConfigError) as info:
        load_path(cfg)
    p = _only(info.value)
    assert p.file == str(cfg) and "RecursionError" in p.message
    with pytest.raises(ConfigError, match="RecursionError"):
        load_text(PEER, "t.yaml")


def test_validate_reports_a_hostile_file_like_any_invalid_one(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(_nested(5000))
    assert validate_main(cfg) == 1
    assert "nested deeper than" in capsys.readouterr().err
