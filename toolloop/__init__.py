"""toolloop: the tool loop of an LLM chat bot, as a pure state machine with an anyio interpreter.

What a bot author needs, in one import::

    from toolloop import OpenAICompatProvider, ToolRegistry, run_turn

`__all__` lists it in the order a first program meets it: run a turn, its
tools, the turn's settings, the configuration, the result, the built-in
ports, the errors. More facades serve other readers: `toolloop.ports`
(the protocols and their data, for an adapter's author), `toolloop.observe`
(the host events `on_event` receives), `toolloop.engine`
(the pure core: `step`, state, events, effects, traces), `toolloop.testing`
(a recording channel, a loopback model server) and `toolloop.discord` (the
Discord host). Anything else is internal and may change. Importing this
package loads neither trio nor rich: an asyncio bot pays only for anyio,
httpx, attrs, cattrs and jsonschema.
"""

from toolloop.effects.approvals import MemoryApprovals
from toolloop.effects.config_loading import load_config
from toolloop.effects.console import ConsoleChannel
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.interpreter import ImpersonationAborted, run_tool_loop
from toolloop.effects.observe.trace_file import trace_file
from toolloop.effects.one_call import run_turn
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.registry.schema import ToolSchemaError
from toolloop.effects.registry.signature import Secret, SignatureError
from toolloop.effects.turn import Attempt, RetryableError, run_generation_turn
from toolloop.states import (
    ApiFamily,
    ContextItem,
    GenerationTurnResult,
    LoopConfig,
    Persona,
    StreamError,
    StreamResult,
    StreamStatus,
    TokenUsage,
    ToolResult,
    TurnSettings,
    TurnStatus,
)
from toolloop.states.errors import ToolloopError

__all__ = [  # noqa: RUF022 (in meaning order, not alphabetical)
    # run a turn
    "run_turn",
    "run_tool_loop",
    "run_generation_turn",
    "Attempt",
    # tools
    "ToolRegistry",
    "ToolCall",
    "ToolResult",
    "Secret",
    # the turn's settings
    "TurnSettings",
    "ContextItem",
    "Persona",
    # configuration
    "LoopConfig",
    "load_config",
    # the result
    "GenerationTurnResult",
    "TurnStatus",
    "StreamResult",
    "StreamStatus",
    "StreamError",
    "TokenUsage",
    "trace_file",
    # built-in ports
    "OpenAICompatProvider",
    "ApiFamily",
    "ConsoleChannel",
    "MemoryTurnControl",
    "MemoryApprovals",
    # errors
    "ToolloopError",
    "ToolSchemaError",
    "SignatureError",
    "RetryableError",
    "ImpersonationAborted",
]
