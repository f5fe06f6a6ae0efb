"""The installed package as a bot author meets it: small facades, one per audience, light to load.

`from toolloop import ...` gives exactly the names below, in the order a first
program meets them; `toolloop.ports`, `toolloop.observe`, `toolloop.engine`,
`toolloop.testing`, `toolloop.discord` and the extras' facades give theirs;
every sample of the docs imports only from these. The command line says
which extra it needs instead of a traceback.
"""

from __future__ import annotations

import ast
import importlib
import importlib.resources
import inspect
import os
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

import toolloop
from tests.docs_samples import DOCUMENTS, samples

PUBLIC = [
    # run a turn
    *("run_turn", "run_tool_loop", "run_generation_turn", "Attempt"),
    # tools
    *("ToolRegistry", "ToolCall", "ToolResult", "Secret"),
    # the turn's settings
    *("TurnSettings", "ContextItem", "Persona"),
    # configuration
    *("LoopConfig", "load_config"),
    # the result
    *("GenerationTurnResult", "TurnStatus", "StreamResult", "StreamStatus", "StreamError"),
    *("TokenUsage", "trace_file"),
    # built-in ports
    *("OpenAICompatProvider", "ApiFamily", "ConsoleChannel", "MemoryTurnControl"),
    "MemoryApprovals",
    # errors
    *("ToolloopError", "ToolSchemaError", "SignatureError", "RetryableError"),
    "ImpersonationAborted",
]
FACADES = {
    "toolloop.ports": {
        *("Provider", "ProviderDescriptor", "ApiFamily", "StreamRequest", "StreamSink"),
        *("StreamResult", "StreamStatus", "StreamError", "TokenUsage", "FunctionCall"),
        "JsonObject",
        *("ToolRegistryPort", "ToolSpec", "ToolContext", "ToolInvocation", "StreamingContext"),
        *("ToolResult", "ToolHistoryEntry", "ToolExecution", "DeliberateMode", "Trigger"),
        *("Channel", "StreamSpan", "Notice", "NoticeCatalog", "PersonaResponse"),
        *("ThoughtLogOwner", "Sticker", "TurnControl", "StopRequest", "KillHandle"),
        *("KillSignal", "ContextStash", "Observer"),
        *("ApprovalPort", "ApprovalRequest", "ApprovalDecision", "ApprovalStatus"),
    },
    "toolloop.engine": {
        *("step", "Step", "initial_state", "IterationState", "Phase", "Move", "InvalidEvent"),
        *("Event", "TurnStarted", "StreamEnded", "ToolSettled", "StashTaken", "StopRequest"),
        *("Effect", "StreamOnce", "DispatchTool", "StartTool", "AwaitTools"),
        *("TakeStashedContext", "SendNotice"),
        *("NoticeKey", "Log", "Level", "ResetFollowUpCount", "IncrementFollowUpCount"),
        *("QueueStopResponse", "ClearStopRequest", "MarkToolChainActive", "SetTextSuppression"),
        *("CountToolUsage", "RetainAffordance", "Finish", "RaiseError", "ErrorKind"),
        *("parse_config", "LoadedConfig", "ConfigWarning"),
        *("Trace", "TraceStep", "TraceError", "TraceMismatch", "TraceEncoder"),
        *("dump_lines", "load_lines", "load_bytes", "replay"),
        *("VerbatimToolCallParser", "VerbatimCall"),
    },
    "toolloop.testing": {
        *("ScriptedProvider", "Reply", "ScriptExhausted", "RecordingChannel", "ModelServer"),
        *("LoopbackServer", "Responder", "check_invariants"),
        *("GeminiServer", "GeminiError", "GeminiRequest"),
    },
    "toolloop.mcp": {"HttpServer", "McpServer", "McpServerError", "McpToolSource", "StdioServer"},
    "toolloop.otel": {
        *("CAPTURE_CONTENT_VARIABLE", "SEMCONV_VERSION", "Telemetry", "TurnTrace"),
        "sdk_configured",
    },
    "toolloop.observe": {
        *("HostObserver", "HostEvent", "StreamStarted", "StreamFirstChunk", "StreamFinished"),
        *("ToolStarted", "ToolFinished", "ApprovalEvent", "ApprovalAsked", "ApprovalAnswered"),
        *("ApprovalExpired", "ApprovalWithdrawn", "NoticeShown", "TurnFinished"),
    },
    "toolloop.inspect": {"Inspector", "Running", "TokenRequired", "TurnView", "serve_in_thread"},
    "toolloop.durable": {
        *("Journal", "JournaledTurn", "TurnPorts", "run_journaled", "resume", "resume_turn"),
        *("JournalError", "TurnInProgress", "ReplayError", "STALE_AFTER_S"),
        *("HeldMessage", "HeldReport", "HoldingChannel", "RecallingChannel"),
    },
    "toolloop.temporal": {
        *("TurnInput", "TurnWorkflow", "TurnActivities", "Ports", "Decision", "Waiting"),
        *("connect", "start_turn", "turn_worker", "data_converter", "TASK_QUEUE"),
        *("RESULT_LIMIT", "HISTORY_EVENTS", "HISTORY_BYTES", "ForeignPayload"),
    },
    "toolloop.gemini": {"GeminiProvider", "DEFAULT_BASE_URL", "SKIP_SIGNATURE"},
    "toolloop.discord": {
        *("ToolloopBot", "BotSettings", "DiscordPersona", "DiscordChannel", "TurnManager"),
        *("TurnRequest", "EditWindow", "Voice", "BotVoice", "WebhookVoice", "Clock"),
        *("AnyioClock", "cut_page", "notice_embed", "DeliveryError", "MissingSetting"),
        *("Access", "addressed", "read_message", "prompt", "no_pings", "paginate", "Page"),
        *("ChannelEvent", "ChannelObserver", "BadSetting", "image_urls", "reply_chain"),
        *("DiscordApprovals", "TurnApprovals", "ApprovalButton", "BatchLines"),
        "closing_on_signals",
    },
}
SUBPACKAGES = {
    "effects",
    "engine",
    "specs",
    "states",
    "testing",
    "tools",
    "ports",
    "discord",
    "mcp",
    "gemini",
    "durable",
    "temporal",
    "otel",
    "inspect",
    "observe",
}
ROOT = Path(__file__).resolve().parent.parent


class TestTheNames:
    def test_every_public_error_is_a_toolloop_error(self) -> None:
        """One error family: each public exception class derives from `ToolloopError`."""
        errors = [
            value
            for value in vars(toolloop).values()
            if isinstance(value, type) and issubclass(value, BaseException)
        ]
        assert len(errors) == 5
        assert [e.__name__ for e in errors if not issubclass(e, toolloop.ToolloopError)] == []

    def test_all_is_exactly_the_public_api_in_meaning_order(self) -> None:
        """`__all__` is the list above, in its order: run a turn first, errors last."""
        assert toolloop.__all__ == PUBLIC
        assert len(PUBLIC) == len(set(PUBLIC)) <= 30

    def test_every_public_name_is_there(self) -> None:
        """Each name of `__all__` is an attribute of the package (`from toolloop import *`)."""
        namespace: dict[str, object] = {}
        exec("from toolloop import *", namespace)
        assert set(namespace) >= set(PUBLIC)

    def test_nothing_internal_leaks(self) -> None:
        """Besides `__all__`, the package shows only its subpackages: no stray helper or module."""
        shown = {name for name in vars(toolloop) if not name.startswith("_")}
        modules = {name for name in shown if isinstance(getattr(toolloop, name), types.ModuleType)}
        assert modules <= SUBPACKAGES
        assert shown - modules == set(PUBLIC)

    def test_classes_and_functions_are_toolloops_own_and_documented(self) -> None:
        """Each public class and function is defined in toolloop and has a docstring."""
        for facade in ("toolloop", *FACADES):
            module = importlib.import_module(facade)
            for name in module.__all__:
                value = getattr(module, name)
                if inspect.isclass(value) or inspect.isfunction(value):
                    assert value.__module__.startswith("toolloop."), f"{facade}.{name}"
                    assert inspect.getdoc(value), f"{facade}.{name}"

    def test_the_package_is_typed(self) -> None:
        """`py.typed` ships beside `__init__.py`, so type checkers read the annotations."""
        assert importlib.resources.files("toolloop").joinpath("py.typed").is_file()


class TestTheFacades:
    @pytest.mark.parametrize("facade", sorted(FACADES))
    def test_all_is_exactly_the_facades_names(self, facade: str) -> None:
        """Each facade's `__all__` is its list above, without repeats, every name importable."""
        module = importlib.import_module(facade)
        assert sorted(module.__all__) == sorted(FACADES[facade])
        assert len(module.__all__) == len(set(module.__all__))
        assert [name for name in module.__all__ if not hasattr(module, name)] == []

    def test_engine_step_is_the_function_and_its_module_still_imports(self) -> None:
        """`toolloop.engine.step` is the function `step`; the module stays importable."""
        from toolloop.engine.step import initial_state

        engine = importlib.import_module("toolloop.engine")
        assert engine.step is sys.modules["toolloop.engine.step"].step
        assert callable(initial_state)

    def test_observe_gives_every_kind_of_host_event(self) -> None:
        """Each class `HostEvent` (and `ApprovalEvent`) can be is on `toolloop.observe`."""
        observe = importlib.import_module("toolloop.observe")
        kinds = {*typing.get_args(observe.HostEvent), *typing.get_args(observe.ApprovalEvent)}
        assert len(kinds) == 11
        missing = {kind for kind in kinds if getattr(observe, kind.__name__, None) is not kind}
        assert missing == set()

    def test_the_same_name_is_the_same_object_in_every_facade(self) -> None:
        """A name two facades share (`StreamResult`, `ToolResult`, ...) is one object."""
        seen: dict[str, object] = {name: getattr(toolloop, name) for name in PUBLIC}
        for facade in sorted(FACADES):
            module = importlib.import_module(facade)
            for name in module.__all__:
                assert seen.setdefault(name, getattr(module, name)) is getattr(module, name), name


def imports_of_samples() -> list[tuple[str, str, str]]:
    """(sample, module, name) of every toolloop import in README.md's and docs/'s samples."""
    found = []
    for document in DOCUMENTS:
        for sample in samples(document):
            for node in ast.walk(ast.parse(sample.code)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolloop"):
                    found += [(sample.name, node.module or "", a.name) for a in node.names]
                elif isinstance(node, ast.Import):
                    found += [(sample.name, a.name, "") for a in node.names]
    return [item for item in found if item[1].split(".")[0] == "toolloop"]


class TestTheDocsUseTheFacades:
    def test_every_sample_imports_only_facade_names(self) -> None:
        """A sample imports from `toolloop` or a facade, and only the names of its `__all__`."""
        listed = {"toolloop": set(PUBLIC), **FACADES}
        found = imports_of_samples()
        wrong = [item for item in found if item[2] not in listed.get(item[1], set())]
        assert wrong == []
        assert len(found) > 50  # the samples were read


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
        """`toolloop` without transitions (or rich, trio) says: install `toolloop-engine[cli]`."""
        done = run_python(
            "import sys; sys.modules['transitions'] = None\n"
            "from toolloop.tools import main\n"
            "sys.argv = ['toolloop', 'diagram']; sys.exit(main())"
        )
        assert done.returncode == 2
        assert (
            done.stderr
            == "toolloop: this command needs transitions: pip install 'toolloop-engine[cli]'\n"
        )

    def test_without_the_discord_extra_the_discord_command_names_it(self) -> None:
        """`toolloop discord` without discord.py names `toolloop-engine[discord]`, status 2."""
        done = run_python(
            "import sys; sys.modules['discord'] = None\n"
            "from toolloop.tools import main\n"
            "sys.argv = ['toolloop', 'discord']; sys.exit(main())"
        )
        assert done.returncode == 2
        assert done.stderr == (
            "toolloop: this command needs discord: pip install 'toolloop-engine[discord]'\n"
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
