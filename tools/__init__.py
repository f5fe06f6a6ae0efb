"""The `toolloop` command line (`cli`), its demo and the loopback model server.

`main` is the installed `toolloop` command. The commands need the `cli` extra
(rich, transitions, trio), `toolloop discord` the `discord` extra; without
them a command says which to install instead of a traceback.
"""

import sys

EXTRAS = {"rich": "cli", "transitions": "cli", "trio": "cli", "discord": "discord"}
"""The extra that brings each top-level module the commands import."""


def main() -> int:
    """Run the `toolloop` command; a missing extra is a one-line error, status 2."""
    try:
        from toolloop.tools.cli import main as run

        return run()
    except ModuleNotFoundError as missing:
        extra = EXTRAS.get(missing.name or "")
        if extra is None:
            raise
        print(
            f"toolloop: this command needs {missing.name}: pip install 'toolloop-engine[{extra}]'",
            file=sys.stderr,
        )
        return 2
