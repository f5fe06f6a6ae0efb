"""The installed package as a bot author meets it: one import, a curated API, light to load.

`from toolloop import ...` gives exactly the names below; the command line
says which extra it needs instead of a traceback.
"""

from __future__ import annotations

import importlib.resources
import inspect
import os
import subprocess
import sys
import types
from pathlib import Path

import toolloop

PUBLIC = {
    # the loop and the generation turn
    *("Attempt", "ImpersonationAborted", "Observer", "RetryableError", "ToolloopError"),
    *("run_generation_turn", "run_tool_loop"),
    # the tool registry and its decorator, typed tools' secret marker
    *("Secret", "ToolCall", "ToolExecution", "ToolRegistry", "ToolSchemaError"),
    # the ports, and the in-memory ones
    *("Channel", "ContextStash", "KillHandle", "MemoryTurnControl", "Notice", "NoticeCatalog"),
    *("Provider", "RecordingChannel", "StreamRequest", "StreamSink", "StreamSpan"),
    *("KillSignal", "ToolInvocation"),
    *("ToolRegistryPort", "TurnControl"),
    # the provider and the loopback model server
    *("ModelServer", "OpenAICompatProvider"),
    # configuration
    *("ConfigWarning", "LoadedConfig", "LoopConfig", "load_config"),
    # the data a host builds or reads
    *("ApiFamily", "ContextItem", "DeliberateMode", "FunctionCall", "GenerationTurnResult"),
    *("JsonObject", "Persona", "PersonaResponse", "ProviderDescriptor", "Sticker"),
    *("StreamError", "StreamResult", "StreamStatus", "ThoughtLogOwner", "ToolContext"),
    *("ToolHistoryEntry", "ToolResult", "ToolSpec", "Trigger", "TurnSettings", "TurnStatus"),
    # the pure core
    *("InvalidEvent", "IterationState", "Phase", "Step", "initial_state", "step"),
    *("Event", "StashTaken", "StopRequest", "StreamEnded", "ToolSettled", "TurnStarted"),
    *("ClearStopRequest", "CountToolUsage", "DispatchTool", "Effect", "ErrorKind", "Finish"),
    *("IncrementFollowUpCount", "Level", "Log", "MarkToolChainActive", "NoticeKey"),
    *("QueueStopResponse", "RaiseError", "ResetFollowUpCount", "RetainAffordance"),
    *("SendNotice", "SetTextSuppression", "StreamOnce", "TakeStashedContext"),
    *("VerbatimCall", "VerbatimToolCallParser"),
    # traces
    *("Trace", "TraceError", "TraceStep", "dump_lines", "load_lines", "replay"),
}
SUBPACKAGES = {"effects", "engine", "specs", "states", "tools", "durable"}
"""The subpackages, and a capability's facade module (`toolloop.durable`) once imported."""
ROOT = Path(__file__).resolve().parent.parent


class TestTheNames:
    def test_every_public_error_is_a_toolloop_error(self) -> None:
        """One error family: each public exception class derives from `ToolloopError`."""
        errors = [
            value
            for value in vars(toolloop).values()
            if isinstance(value, type) and issubclass(value, BaseException)
        ]
        assert len(errors) >= 6
        assert [e.__name__ for e in errors if not issubclass(e, toolloop.ToolloopError)] == []

    def test_all_is_exactly_the_public_api(self) -> None:
        """No public name disappears and none is added without being listed here."""
        assert sorted(toolloop.__all__) == sorted(PUBLIC)
        assert len(toolloop.__all__) == len(set(toolloop.__all__))

    def test_every_public_name_is_there(self) -> None:
        """Each name of `__all__` is an attribute of the package (`from toolloop import *`)."""
        namespace: dict[str, object] = {}
        exec("from toolloop import *", namespace)
        assert set(namespace) >= PUBLIC

    def test_nothing_internal_leaks(self) -> None:
        """Besides `__all__`, the package shows only its subpackages: no stray helper or module."""
        shown = {name for name in vars(toolloop) if not name.startswith("_")}
        modules = {name for name in shown if isinstance(getattr(toolloop, name), types.ModuleType)}
        assert modules <= SUBPACKAGES
        assert shown - modules == PUBLIC

    def test_classes_and_functions_are_toolloops_own_and_documented(self) -> None:
        """Each public class and function is defined in toolloop and has a docstring."""
        for name in PUBLIC:
            value = getattr(toolloop, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert value.__module__.startswith("toolloop."), name
                assert inspect.getdoc(value), name

    def test_the_package_is_typed(self) -> None:
        """`py.typed` ships beside `__init__.py`, so type checkers read the annotations."""
        assert importlib.resources.files("toolloop").joinpath("py.typed").is_file()


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter outside the repository: only the installed package counts."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


class TestImportCost:
    def test_importing_toolloop_loads_neither_trio_nor_rich_nor_transitions(self) -> None:
        """An asyncio bot pays only for the library: no trio, rich or transitions at import.

        click is hidden first: httpx imports rich through its own command line
        when click is installed (this venv has it for cosmic-ray); a bot without
        click, and `make wheel-check`'s venv, load no rich at all.
        """
        done = run_python(
            "import sys; sys.modules['click'] = None\n"
            "from toolloop import *\n"
            "print(sorted({'trio', 'rich', 'transitions', 'discord'} & set(sys.modules)))"
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


class TestTheCommandLine:
    def test_without_the_cli_extra_the_command_names_it(self) -> None:
        """`toolloop` without transitions (or rich, trio) says: install `toolloop[cli]`."""
        done = run_python(
            "import sys; sys.modules['transitions'] = None\n"
            "from toolloop.tools import main\n"
            "sys.argv = ['toolloop', 'diagram']; sys.exit(main())"
        )
        assert done.returncode == 2
        assert (
            done.stderr == "toolloop: this command needs transitions: pip install 'toolloop[cli]'\n"
        )

    def test_without_the_discord_extra_the_discord_command_names_it(self) -> None:
        """`toolloop discord` without discord.py says to install `toolloop[discord]`, status 2."""
        done = run_python(
            "import sys; sys.modules['discord'] = None\n"
            "from toolloop.tools import main\n"
            "sys.argv = ['toolloop', 'discord']; sys.exit(main())"
        )
        assert done.returncode == 2
        assert done.stderr == (
            "toolloop: this command needs discord: pip install 'toolloop[discord]'\n"
        )

    def test_another_missing_module_is_not_blamed_on_the_extra(self) -> None:
        """Only the extra's own modules get the hint; any other import error propagates."""
        done = run_python(
            "import sys; sys.modules['jsonschema'] = None\n"
            "from toolloop.tools import main\n"
            "sys.argv = ['toolloop', 'diagram']; sys.exit(main())"
        )
        assert done.returncode == 1
        assert "ModuleNotFoundError" in done.stderr and "jsonschema" in done.stderr

    def test_svg_without_graphviz_says_how_to_get_it(self) -> None:
        """Graphviz is optional: without `dot` on PATH, svg is refused with a clear message."""
        bin_dir = str(Path(sys.executable).parent)
        done = subprocess.run(
            [str(Path(bin_dir) / "toolloop"), "diagram", "--format", "svg"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PATH": bin_dir},
        )
        assert done.returncode == 2
        assert done.stderr.startswith("toolloop diagram: --format svg needs Graphviz's `dot`")
        assert "install Graphviz" in done.stderr
