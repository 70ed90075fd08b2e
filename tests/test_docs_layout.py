"""The README's layout block and docs/architecture.md name the tree as it is:
every package, module and script exists under the name given, and none is
left out."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WHEEL_ONLY = "relax_edge/_sdk"   # made by setup.py in a wheel, not in a checkout


def layout_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1]
    return section.split("```", 2)[1]


def layout_entries() -> list:
    """The first column of each line of the block: a path, or the continuation of the line above."""
    return [line.split()[0] for line in layout_block().splitlines() if line.strip() and not line.startswith(" ")]


def test_every_named_path_exists():
    missing = [e for e in layout_entries() if "," not in e and not (ROOT / e.rstrip("/")).exists()]
    assert missing == [], f"README layout names paths that do not exist: {missing}"


def test_every_package_and_module_is_named():
    named = set(layout_entries())
    pkg = ROOT / "relax_edge"
    tree = sorted(f"relax_edge/{p.name}/" for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    tree += sorted(f"relax_edge/{p.name}" for p in pkg.glob("*.py") if p.name != "__init__.py")
    assert [p for p in tree if p not in named] == [], "README layout leaves these out"


def test_every_script_is_named():
    lines = layout_block().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("scripts/"))
    end = next(i for i in range(first + 1, len(lines)) if not lines[i].startswith(" "))
    scripts_line = " ".join(lines[first:end])
    left_out = [p.name for p in sorted((ROOT / "scripts").iterdir())
                if p.suffix in (".py", ".sh") and not re.search(rf"\b{re.escape(p.name)}\b", scripts_line)]
    assert left_out == [], "README layout's scripts/ line leaves these out"


@pytest.mark.parametrize("doc", ["README.md", "docs/architecture.md"])
def test_relax_edge_paths_in_docs_exist(doc):
    """Every `relax_edge/...py` or `runtime_c/...` path written in the doc exists."""
    text = (ROOT / doc).read_text()
    paths = set(re.findall(r"\b((?:relax_edge|runtime_c)/[\w/.-]*\w)", text)) - {WHEEL_ONLY}
    assert paths, f"{doc} names no paths"
    arch = doc == "docs/architecture.md"
    missing = sorted(p for p in paths if not (ROOT / p).exists()
                     and not (arch and (ROOT / "relax_edge" / p.split("/", 1)[1]).exists()))
    assert missing == [], f"{doc} names paths that do not exist"
