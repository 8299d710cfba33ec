"""The API layer reads the agent through `ReadView` only: no import of the daemon, not even for
type hints (import-linter ignores TYPE_CHECKING imports, so this checks the source itself)."""

import ast
import pathlib

import agent.api

API = pathlib.Path(agent.api.__file__).parent


def _imports(path: pathlib.Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            out.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_api_imports_nothing_from_the_daemon():
    offenders = {p.name: m for p in API.glob("*.py") for m in _imports(p)
                 if m.startswith("..daemon") or m.startswith("agent.daemon") or m.startswith("...daemon")}
    assert offenders == {}


def test_daemon_view_implements_the_read_view():
    from agent.api.readview import ReadView
    from agent.daemon.view import AgentView

    wanted = {n for n in vars(ReadView) if not n.startswith("_")}
    assert wanted <= set(dir(AgentView))
