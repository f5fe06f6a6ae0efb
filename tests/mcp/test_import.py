"""`toolloop.mcp` is an extra: only importing it loads the `mcp` package."""

from __future__ import annotations

from tests.test_public_api import run_python


def test_importing_toolloop_loads_no_mcp() -> None:
    done = run_python(
        "import sys; sys.modules['click'] = None\n"
        "from toolloop import *\n"
        "print(sorted({'mcp', 'mcp_types', 'httpx2'} & set(sys.modules)))"
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


def test_toolloop_mcp_is_the_public_face_of_effects_mcp() -> None:
    """The thin module re-exports exactly the subpackage's public names."""
    import toolloop.effects.mcp as room
    import toolloop.mcp as face

    assert face.__all__ == room.__all__
    assert all(getattr(face, name) is getattr(room, name) for name in face.__all__)
