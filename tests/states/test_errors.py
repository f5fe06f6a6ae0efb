"""One error family: everything toolloop raises derives from `ToolloopError` and its builtin."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import toolloop
from toolloop.states.errors import ToolloopError

PACKAGES = ("states", "engine", "effects", "specs", "tools")


def _error_classes() -> list[type[BaseException]]:
    """Every public exception class defined in toolloop's own modules."""
    found: dict[str, type[BaseException]] = {}
    for package in PACKAGES:
        module = importlib.import_module(f"toolloop.{package}")
        for info in pkgutil.walk_packages(module.__path__, f"toolloop.{package}."):
            if info.name.endswith("__main__"):
                continue
            for name, value in inspect.getmembers(importlib.import_module(info.name)):
                public = not name.startswith("_")
                defined_here = getattr(value, "__module__", "") == info.name
                is_error = isinstance(value, type) and issubclass(value, BaseException)
                if public and defined_here and is_error:
                    found[f"{info.name}.{name}"] = value
    return list(found.values())


@pytest.mark.parametrize("error", _error_classes(), ids=lambda error: error.__qualname__)
def test_every_error_class_derives_from_toolloop_error_and_a_builtin(
    error: type[BaseException],
) -> None:
    """`except ToolloopError` catches it, and so does the builtin it always derived from."""
    assert issubclass(error, ToolloopError)
    builtins = [base for base in error.__mro__ if base.__module__ == "builtins"]
    assert builtins[0] is not object


def test_the_impersonation_abort_is_named_for_what_it_is() -> None:
    """The loop's one deliberate raise is `ImpersonationAborted`, a RuntimeError."""
    assert issubclass(toolloop.ImpersonationAborted, RuntimeError)
    assert issubclass(toolloop.ImpersonationAborted, ToolloopError)
