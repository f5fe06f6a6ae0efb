"""The root of every error toolloop raises.

Each error class derives from `ToolloopError` and from the builtin it has
always been (`ValueError` for bad input, `RuntimeError` for a broken run, ...),
so `except ToolloopError` catches everything the library raises on purpose
and `except ValueError` keeps working where it did.
"""

__all__ = ["ToolloopError"]


class ToolloopError(Exception):
    """An error raised by toolloop; its message says what went wrong and where."""
