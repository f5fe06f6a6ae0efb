"""The `toolloop` command line (`cli`), its demo and the loopback model server.

`main` is the installed `toolloop` command. The commands need the `cli` extra
(rich, transitions, trio); without it they say so instead of a traceback.
"""

import sys

CLI_EXTRA = frozenset({"rich", "transitions", "trio"})
"""The top-level modules `pip install 'toolloop[cli]'` brings."""


def main() -> int:
    """Run the `toolloop` command; a missing `cli` extra is a one-line error, status 2."""
    try:
        from toolloop.tools.cli import main as run

        return run()
    except ModuleNotFoundError as missing:
        if missing.name not in CLI_EXTRA:
            raise
        print(
            f"toolloop: the command line needs {missing.name}: pip install 'toolloop[cli]'",
            file=sys.stderr,
        )
        return 2
