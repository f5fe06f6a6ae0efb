"""docs/architecture.md stays true: the paths it names exist, every module of the package
is in exactly one of its rooms, and its floors table is the layering the import test enforces."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_architecture import ALLOWED

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = (*sorted(ALLOWED),)
"""The folders whose modules are the package: the subpackages and `toolloop/` itself."""
CODE = re.compile(r"`([^`\s]+)`")
PATH = re.compile(r"^[\w.<>-]+(/[\w.<>-]*)*$")
SUFFIXES = (".py", ".md", ".toml", ".yml", ".mmd", ".svg")


def _paths(text: str) -> set[str]:
    """The repository paths a text names in backticks (placeholders such as `<host>` aside)."""
    named = set()
    for token in CODE.findall(text):
        is_path = "/" in token or token.endswith(SUFFIXES)
        if is_path and PATH.match(token) and "<" not in token:
            named.add(token)
    return named


def _table(text: str, heading: str) -> list[list[str]]:
    """The body rows of the first Markdown table under `heading`, as lists of cells."""
    _, found, after = text.partition(f"\n{heading}\n")
    assert found, f"docs/architecture.md has no {heading!r} section"
    section = after.split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _rooms(text: str) -> list[set[str]]:
    """Each room of the rooms table: the paths its `where` column names."""
    return [_paths(where) for _, where, _ in _table(text, "## The rooms")]


def _modules() -> list[str]:
    """Every module of the package, as a path from the repository root."""
    return sorted(
        path.relative_to(ROOT).as_posix()
        for folder in PACKAGE
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    )


def _homes(module: str, rooms: list[set[str]]) -> list[int]:
    """The rooms `module` is in: named itself, or inside a folder a room names."""
    return [
        number
        for number, room in enumerate(rooms)
        if any(module == path or (path.endswith("/") and module.startswith(path)) for path in room)
    ]


def _homeless(text: str, modules: list[str]) -> list[str]:
    """The modules in no room of `text`, or in more than one."""
    rooms = _rooms(text)
    return [module for module in modules if len(_homes(module, rooms)) != 1]


def test_every_path_the_doc_names_exists() -> None:
    """A folder or file named in docs/architecture.md is there, as named."""
    missing = []
    for path in sorted(_paths(DOC.read_text("utf-8"))):
        found = ROOT / path
        if not (found.is_dir() if path.endswith("/") else found.is_file()):
            missing.append(path)
    assert missing == []


def test_every_module_of_the_package_is_in_exactly_one_room() -> None:
    """Each module of the package (every floor, `toolloop/` too) has one room in the doc."""
    assert _homeless(DOC.read_text("utf-8"), _modules()) == []


def test_the_floors_table_is_the_layering_the_import_test_enforces() -> None:
    """The floors and what each may import are `tests/test_architecture.py`'s `ALLOWED`."""
    floors = {
        floor.strip("`/"): {path.strip("/") for path in _paths(imports)}
        for floor, _, imports in _table(DOC.read_text("utf-8"), "## The floors")
    }
    assert floors == {floor: allowed - {floor} for floor, allowed in ALLOWED.items()}


def test_a_module_outside_every_room_is_found() -> None:
    """The room check can fail: a module no room names, or two rooms name, is reported."""
    doc = "\n## The rooms\n\n| room | where | what |\n|---|---|---|\n| a | `engine/` | x |\n"
    modules = ["engine/step.py", "effects/ports.py"]
    assert _homeless(doc, modules) == ["effects/ports.py"]
    twice = doc + "| b | `engine/step.py` | y |\n"
    assert _homeless(twice, modules) == ["engine/step.py", "effects/ports.py"]


def test_placeholders_are_not_taken_for_paths() -> None:
    """`effects/<host>/` stands for a folder to come and `toolloop.engine` is a module name."""
    text = "`effects/<host>/` `toolloop.engine` `engine/table.py` `pyproject.toml` `a b`"
    assert _paths(text) == {"engine/table.py", "pyproject.toml"}
