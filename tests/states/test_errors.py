"""One error family: everything toolloop raises derives from `ToolloopError` and its builtin,
and the family is drawn, truly, in `toolloop.states.errors`'s docstring."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import toolloop
from toolloop.states import errors
from toolloop.states.errors import ToolloopError

PACKAGES = ("states", "engine", "effects", "specs", "testing", "tools")
FACADES = ("discord", "inspect", "mcp", "otel", "ports")
"""The `toolloop/*.py` modules besides `__init__` (the facades)."""
BUILTIN_ERRORS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)
DRAWN = re.compile(r"^(?P<indent> *)(?P<name>\w+)(?: \((?P<builtin>\w+)\))? +(?P<module>[\w.]+)$")


def _modules() -> list[ModuleType]:
    """Every module of the package, imported."""
    found = [toolloop, *(importlib.import_module(f"toolloop.{name}") for name in FACADES)]
    for package in PACKAGES:
        module = importlib.import_module(f"toolloop.{package}")
        found.append(module)
        for info in pkgutil.walk_packages(module.__path__, f"toolloop.{package}."):
            if not info.name.endswith("__main__"):
                found.append(importlib.import_module(info.name))
    return found


MODULES = _modules()


def _family(root: type[ToolloopError]) -> list[type[ToolloopError]]:
    """`root`'s subclasses at every depth, each once."""
    found: dict[type[ToolloopError], None] = {}
    for sub in root.__subclasses__():
        found[sub] = None
        found.update(dict.fromkeys(_family(sub)))
    return list(found)


def _drawing() -> dict[str, tuple[str | None, str | None, str]]:
    """The docstring's tree: each class drawn, with its drawn parent, builtin and module."""
    doc = errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1]
    parents: list[tuple[int, str]] = []
    drawn: dict[str, tuple[str | None, str | None, str]] = {}
    for line in block.splitlines():
        if line.strip() == "ToolloopError":
            parents = [(len(line) - len(line.lstrip()), "ToolloopError")]
            continue
        match = DRAWN.match(line)
        if match is None:
            continue
        depth = len(match["indent"])
        while parents and parents[-1][0] >= depth:
            parents.pop()
        parent = parents[-1][1] if parents else None
        assert match["name"] not in drawn, f"{match['name']} is drawn twice"
        drawn[match["name"]] = (parent, match["builtin"], match["module"])
        parents.append((depth, match["name"]))
    return drawn


def _drawn_builtin(error: type[BaseException]) -> str | None:
    """The builtin a class adds to its family's (drawn beside it), None when it adds none."""
    own = [b for b in error.__bases__ if b.__module__ == "builtins" and b is not Exception]
    return own[0].__name__ if own else None


def test_the_drawing_lists_every_subclass_of_toolloop_error_with_its_parent_and_builtin() -> None:
    """Every ToolloopError subclass the package defines is in the drawing (and nothing else
    is), under the parent it derives from, with the builtin and module it has."""
    family = [e for e in _family(ToolloopError) if e.__module__.startswith("toolloop.")]
    actual = {
        error.__name__: (
            next(b.__name__ for b in error.__bases__ if issubclass(b, ToolloopError)),
            _drawn_builtin(error),
            error.__module__.removeprefix("toolloop."),
        )
        for error in family
    }
    assert len(actual) == len(family), "two error classes share a name"
    assert _drawing() == actual


@pytest.mark.parametrize("error", _family(ToolloopError), ids=lambda error: error.__qualname__)
def test_every_error_class_derives_from_toolloop_error_and_a_builtin(
    error: type[BaseException],
) -> None:
    """`except ToolloopError` catches it, and so does the builtin it always derived from."""
    builtins_of = [base for base in error.__mro__ if base.__module__ == "builtins"]
    assert builtins_of[0] is not object


def test_no_error_class_of_the_package_stands_outside_the_family() -> None:
    """Every public exception class a module of the package defines derives from
    ToolloopError. A private one (`_Superseded`, `_StreamBroken`) is its module's own
    control flow, caught in that module, never seen by a caller."""
    outside = [
        f"{module.__name__}.{name}"
        for module in MODULES
        for name, value in inspect.getmembers(module, inspect.isclass)
        if issubclass(value, BaseException)
        and not name.startswith("_")
        and value.__module__ == module.__name__
        and not issubclass(value, ToolloopError)
    ]
    assert outside == []


def _bare_raises(module: ModuleType) -> list[str]:
    """The `raise` statements of `module` that raise a builtin exception class by name."""
    path = Path(inspect.getfile(module))
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id in BUILTIN_ERRORS:
                found.append(f"{path.name}:{node.lineno}: raise {raised.id}")
    return found


def test_no_module_raises_a_bare_builtin_exception() -> None:
    """Every raise site of the package raises a ToolloopError subclass (re-raises aside)."""
    assert [site for module in MODULES for site in _bare_raises(module)] == []


def test_the_bare_raise_finder_finds_a_bare_raise() -> None:
    """The check above can fail: it finds the raises of a module that has them."""
    assert _bare_raises(ast) != []


def test_the_impersonation_abort_is_named_for_what_it_is() -> None:
    """The loop's one deliberate raise is `ImpersonationAborted`, a RuntimeError."""
    assert issubclass(toolloop.ImpersonationAborted, RuntimeError)
    assert issubclass(toolloop.ImpersonationAborted, ToolloopError)
