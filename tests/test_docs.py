"""The documentation cannot drift: the generated configuration reference, and every relative link.

* ``docs/configuration.md`` is exactly what `agent.config.reference.render()` writes from the
  models (a model change without regenerating it fails here, with the command to run);
* every field of every kind is described there (an attribute docstring on the model);
* every relative link in ``README.md`` and ``docs/*.md`` points at a file that exists, and a
  ``#anchor`` at a heading of that page (GitHub's heading ids).

The YAML examples of the docs are validated against the models and the CRDs by
tests/test_crds.py and tests/test_crd_cel.py; the stub router snippets are run by
netns-tests/test_stub_router.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from agent.config import reference
from agent.config.kinds import KINDS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def test_configuration_reference_is_generated_from_the_models():
    path = ROOT / reference.OUT
    assert path.is_file(), f"{reference.OUT} is missing: generate it with `{reference.COMMAND}`"
    assert path.read_text() == reference.render(), (
        f"{reference.OUT} differs from the models: regenerate it with `{reference.COMMAND}`")


def test_the_reference_check_command_agrees(tmp_path):
    out = tmp_path / "configuration.md"
    assert reference.main(["--out", str(out), "--check"]) == 1  # missing: stale
    assert reference.main(["--out", str(out)]) == 0
    assert reference.main(["--out", str(out), "--check"]) == 0
    out.write_text(out.read_text().replace("Kernel routing table", "Kernel table"))
    assert reference.main(["--out", str(out), "--check"]) == 1


def test_every_field_of_every_kind_is_described():
    undescribed = [line.split("`")[1] for line in reference.render().splitlines()
                   if line.startswith("* `") and not line.endswith(".") and "): " not in line]
    assert undescribed == [], "add an attribute docstring to these model fields"


def test_every_kind_has_a_valid_example():
    assert set(reference.EXAMPLES) == set(KINDS)
    for kind, text in reference.EXAMPLES.items():
        (doc,) = list(yaml.safe_load_all(text))
        assert doc["kind"] == kind
        KINDS[kind].model_validate(doc, by_alias=True, by_name=False)


def test_the_reference_lists_nested_and_bounded_fields():
    text = reference.render()
    # a field under a list of objects, its bounds and the CEL message the CRD leaves out there
    line = next(l for l in text.splitlines() if l.startswith("* `spec.routes[].prefix`"))
    assert "**required**" in line and "must be a network in CIDR notation" in line
    line = next(l for l in text.splitlines() if l.startswith("* `spec.fib.table`"))
    assert "default `254`" in line and "1 to 4294967295" in line
    assert "one of `warn`, `discardExtra`, `teardown`" in text


# --- links -------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's id of a heading: its text without markup, lowercased, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        m = re.match(r"^#{1,6} (.+?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", page.read_text()))
    return [target for _, target in LINK.findall(text)]


def test_slug_is_githubs():
    assert slug("GTSM (`ttlSecurity`, RFC 5082)") == "gtsm-ttlsecurity-rfc-5082"
    assert slug("Cluster mode: 10,000 Services") == "cluster-mode-10000-services"
    assert slug("Fault suite (`bench/chaos.py`)") == "fault-suite-benchchaospy"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page):
    assert links(page) or page.name != "README.md", "README.md: no links found (is the parser broken?)"
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file {dest.relative_to(ROOT) if ROOT in dest.parents else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert broken == []


def test_the_readme_links_every_page_of_the_docs():
    readme = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    assert [p.name for p in PAGES[1:] if p.resolve() not in readme] == []
