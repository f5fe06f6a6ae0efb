"""The real tool registry: async tools with a JSON schema, behind the gates of SPEC 6 step 6.

`execute` refuses or runs one call and always answers with a `ToolResult`: an
unknown tool, a tool the provider does not support, a tool the live turn
forbids, arguments that break the schema and an exception raised by the tool
are failures whose error the model reads and can act on. Only cancellation (the
interpreter's timeout and kill, the host) propagates.

Secrets: a part of the arguments whose schema says `"writeOnly": true` is
replaced by `[redacted]` wherever the registry hands arguments out for logs,
notices and traces (`redact`, `recent`); `toolloop.effects.registry.redaction` says
which schemas it reads. Validation failures never quote an argument's value
(`toolloop.effects.registry.schema`), so no secret reaches an error through them.

Bounds (docs/reliability.md): the ring keeps the last `RING_SIZE` calls, with
arguments longer than `MAX_KEPT_ARGS_CHARS` characters of JSON replaced by a
marker; a tool's result must be JSON (`json_policy.check_json`) and data longer
than `MAX_RESULT_CHARS` characters of JSON is cut to that many, with a marker,
before it goes to the model and into history; an exception's message is cut
at `MAX_ERROR_CHARS`.
"""

from __future__ import annotations

import collections
import inspect
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeAlias, TypeVar, overload

import attrs
from jsonschema.protocols import Validator

from toolloop.effects.clock import loop_clock
from toolloop.effects.ports import KillSignal, ToolInvocation
from toolloop.effects.registry.redaction import REDACTED as REDACTED
from toolloop.effects.registry.redaction import has_secrets, redact
from toolloop.effects.registry.schema import ToolSchemaError as ToolSchemaError
from toolloop.effects.registry.schema import accepting, problems
from toolloop.effects.registry.schema import check_parameters as check_parameters
from toolloop.effects.registry.signature import (
    ArgumentError,
    SignatureError,
    takes_arguments_dict,
    typed_tool,
)
from toolloop.states import (
    ApiFamily,
    FunctionCall,
    JsonObject,
    ProviderDescriptor,
    ToolContext,
    ToolResult,
    ToolSpec,
)
from toolloop.states.errors import ToolloopError
from toolloop.states.json_policy import JsonInputError, check_json

log = logging.getLogger(__name__)
#: Calls kept by `recent()`.
RING_SIZE = 1000
#: Characters of JSON of one call's (redacted) arguments kept in the ring.
MAX_KEPT_ARGS_CHARS = 10_000
#: Characters of JSON of one result's data sent to the model and kept in history.
MAX_RESULT_CHARS = 100_000
#: Characters of a tool exception's message kept in the failure.
MAX_ERROR_CHARS = 2_000
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
NAME_RULE = "1 to 64 letters, digits, '_' or '-'"
"""What OpenAI-style providers accept as a function name."""
_ENCODER = json.JSONEncoder(ensure_ascii=False)
_make_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)  # None without _json
_C_ENCODER = _make_c_encoder and _make_c_encoder(
    None, _ENCODER.default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True
)
"""CPython's C encoder built once: `JSONEncoder.encode` builds one per call (about 0.7 µs).

Without its cycle check (`markers` None): it only encodes values `check_json`
passed, whose depth bound rules a cycle out.
"""


def _to_json(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False)` of a value `check_json` passed."""
    if _C_ENCODER is None:  # a Python without the C accelerator
        return _ENCODER.encode(value)
    return "".join(_C_ENCODER(value, 0))


class NotRegistered(ToolloopError, KeyError):
    """`unregister` was given a name no tool is registered under."""


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class ToolCall:
    """What a tool function is told besides its arguments."""

    name: str
    """The tool's registered name."""
    context: ToolContext
    """The turn as the engine describes it (SPEC 6 step 3)."""
    invocation: ToolInvocation
    """The interpreter's handles: the turn's kill signal and progress notices."""

    @property
    def killed(self) -> KillSignal:
        """Set when the turn is killed: wait on it to cancel the tool's own I/O."""
        return self.invocation.killed

    async def notify(self, text: str) -> None:
        """Send a progress notice (dropped when the turn suppresses them)."""
        await self.invocation.notify(text)


ToolReturn: TypeAlias = ToolResult | JsonObject | None
ToolFunction: TypeAlias = Callable[[JsonObject, ToolCall], Awaitable[ToolReturn]]
AnyToolFunction = TypeVar("AnyToolFunction", bound=Callable[..., Awaitable[Any]])
"""The dict form `(args, call)` or a typed function (`toolloop.effects.registry.signature`), which
may return any JSON data."""
ProviderGate: TypeAlias = Callable[[ProviderDescriptor], bool]
TurnGate: TypeAlias = Callable[[ToolContext], bool]
FollowUpRule: TypeAlias = Callable[[ProviderDescriptor, str | None], bool]
ApprovalRule: TypeAlias = Callable[[JsonObject, ToolContext], bool]
"""Whether a call needs a person's approval, from its arguments and the turn (SPEC 6c)."""


@attrs.frozen(kw_only=True)
class ToolExecution:
    """One call the registry handled, as kept in the ring of recent executions."""

    tool: str
    args: JsonObject | None
    """The call's arguments with sensitive parameters redacted."""
    ran: bool
    """The tool's code was started (false for a refusal by a gate or the schema)."""
    success: bool
    error: str | None
    """The failure's error; `cancelled` when the call was cancelled (timeout, kill)."""
    duration: float
    """Seconds on the anyio clock, from the call to its answer."""


@attrs.frozen(kw_only=True)
class RegisteredTool:
    """A tool with everything the registry checks before and after running it."""

    spec: ToolSpec
    function: ToolFunction
    validator: Validator
    accepts: Callable[[JsonObject], bool]
    """Exactly whether `validator` finds no problem, at the cost of one fast check."""
    has_secrets: bool
    """Some parameter is `writeOnly`: arguments are redacted wherever they are shown."""
    supports: ProviderGate
    """Static provider support: a refusal says "not available for provider X"."""
    available: TurnGate
    """Live turn state: a refusal says "not available for the current turn"."""
    follow_up: FollowUpRule
    exclusive: bool = False
    """Runs alone within a batch of calls (SPEC 6b item 3)."""
    timeout_ms: int | None = None
    """Its own timeout, fresh per call, instead of `TOOL_EXECUTION_TIMEOUT_MS`."""
    approval: ApprovalRule | None = None
    """Whether a call needs a person's approval first (SPEC 6c); None: never."""
    idempotent: bool = False
    """Safe to run twice: a call in flight when the process died runs again on resume."""


_Kept: TypeAlias = tuple[str, JsonObject | None, bool, bool, str | None, float]


class ToolRegistry:
    """The tools of a bot, run through the gates and the schema of SPEC 6 step 6."""

    def __init__(self) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        self._recent: collections.deque[_Kept] = collections.deque(maxlen=RING_SIZE)
        """Each call's `ToolExecution` fields in order, made a record only when `recent` is read."""
        self._specs: tuple[ProviderDescriptor | None, tuple[ToolSpec, ...]] = (None, ())
        """The last `specs` answer and the descriptor it was for, until a tool is registered."""
        self._approving = 0
        """How many registered tools may need a person's approval (`asks_approval`)."""

    def register(
        self,
        function: Callable[..., Awaitable[Any]],
        *,
        name: str | None = None,
        parameters: JsonObject | None = None,
        description: str | None = None,
        requires_follow_up: bool | FollowUpRule = False,
        providers: Collection[ApiFamily] | ProviderGate | None = None,
        available: TurnGate | None = None,
        exclusive: bool = False,
        timeout: float | None = None,
        requires_approval: bool | ApprovalRule = False,
        idempotent: bool = False,
    ) -> RegisteredTool:
        """Add a tool; its schema is checked here, once, and a bad one raises `ToolSchemaError`.

        `name` defaults to the function's name, `description` to its docstring,
        `parameters` to an object schema without properties, or, for a typed
        function (not `(args, call)`), to the schema its signature implies
        (`toolloop.effects.registry.signature`); it is then called with typed arguments.
        `providers` is the API families that support the tool (or a predicate
        over the provider; None: all). `available` is a predicate over the turn's
        `ToolContext`. `exclusive`: the tool runs alone within a batch of calls.
        `timeout` (seconds, above zero): the tool's own timeout, fresh per call,
        instead of `TOOL_EXECUTION_TIMEOUT_MS`. `requires_approval`: every call waits
        for a person's decision first (SPEC 6c), or, as a predicate over the call's
        arguments and the turn's `ToolContext`, the calls it says.
        `idempotent`: running it twice does no harm, so a resumed turn runs a call
        again that a crash interrupted (`toolloop.effects.durable`).
        """
        tool_name = function.__name__ if name is None else name
        if tool_name in self._tools:
            raise ToolSchemaError(tool_name, "is already registered", "name")
        timeout_ms = _timeout_ms(tool_name, timeout)
        if parameters is None and not takes_arguments_dict(function):
            try:
                typed = typed_tool(function, ToolCall)
            except SignatureError as error:
                raise ToolSchemaError(tool_name, error.problem, error.where) from None
            function, parameters = typed.run, typed.parameters
            description = typed.description if description is None else description
        schema = {"type": "object", "properties": {}} if parameters is None else parameters
        spec = ToolSpec(
            name=check_name(tool_name),
            description=_description(function) if description is None else description,
            parameters=schema,
        )
        validator = check_parameters(tool_name, schema)
        tool = RegisteredTool(
            spec=spec,
            function=function,
            validator=validator,
            accepts=accepting(schema, validator),
            has_secrets=has_secrets(schema),
            supports=_provider_gate(providers),
            available=available or _always,
            follow_up=_follow_up_rule(requires_follow_up),
            exclusive=exclusive,
            timeout_ms=timeout_ms,
            approval=_approval_rule(tool_name, requires_approval),
            idempotent=idempotent,
        )
        self._tools[tool_name] = tool
        self._specs = (None, ())
        self._approving += tool.approval is not None
        return tool

    @overload
    def tool(self, function: AnyToolFunction, /) -> AnyToolFunction: ...

    @overload
    def tool(self, /, **options: Any) -> Callable[[AnyToolFunction], AnyToolFunction]: ...

    def tool(
        self, function: AnyToolFunction | None = None, /, **options: Any
    ) -> AnyToolFunction | Callable[[AnyToolFunction], AnyToolFunction]:
        """Decorator form of `register`: `@registry.tool`, or `@registry.tool(name=...)` with
        the same keyword options."""

        def decorate(function: AnyToolFunction) -> AnyToolFunction:
            self.register(function, **options)
            return function

        return decorate if function is None else decorate(function)

    def unregister(self, name: str) -> None:
        """Remove a registered tool: a tool source whose server stopped offering it."""
        removed = self._tools.pop(name, None)
        if removed is None:
            raise NotRegistered(f'tool "{name}" is not registered')
        self._specs = (None, ())
        self._approving -= removed.approval is not None

    def specs(self, provider: ProviderDescriptor) -> tuple[ToolSpec, ...]:
        """The tools the provider supports, in registration order.

        Asked once per stream with the same descriptor: the answer is kept for it
        (a provider gate is static, `RegisteredTool.supports`) until `register`.
        """
        asked, specs = self._specs
        if provider is not asked:
            specs = tuple(tool.spec for tool in self._tools.values() if tool.supports(provider))
            self._specs = (provider, specs)
        return specs

    def requires_follow_up(
        self, tool: str, provider: ProviderDescriptor, server: str | None
    ) -> bool:
        """Whether the tool's result must be presented by the model (SPEC 7); unknown: no."""
        registered = self._tools.get(tool)
        return registered is not None and registered.follow_up(provider, server)

    def exclusive(self, tool: str) -> bool:
        """Whether the tool was registered `exclusive=True`; unknown: no."""
        registered = self._tools.get(tool)
        return registered is not None and registered.exclusive

    def idempotent(self, tool: str) -> bool:
        """Whether the tool was registered `idempotent=True`; unknown: no."""
        registered = self._tools.get(tool)
        return registered is not None and registered.idempotent

    def timeout_ms(self, tool: str) -> int | None:
        """The tool's own timeout in ms (`timeout=` at registration), or None."""
        registered = self._tools.get(tool)
        return None if registered is None else registered.timeout_ms

    def asks_approval(self) -> bool:
        """Whether any registered tool may need a person's approval (`requires_approval`)."""
        return self._approving > 0

    def needs_approval(self, call: FunctionCall, context: ToolContext) -> bool:
        """Whether the call waits for a person's decision (SPEC 6c): its tool says so and
        it would pass the registry's own checks (a person is never asked about a call
        that could not run: unknown tool, gates, schema). A rule that raises asks."""
        tool = self._tools.get(call.name)
        if tool is None or tool.approval is None:
            return False
        args = {} if call.args is None else call.args
        if _refusal(tool, context, args, _not_json(args)) is not None:
            return False
        try:
            return bool(tool.approval(args, context))
        except Exception:  # the bot's own rule failed: asking is the safe answer
            log.exception("approval rule of tool %s raised; the call waits for approval", call.name)
            return True

    def redact(self, tool: str, args: JsonObject | None) -> JsonObject | None:
        """`args` with every `writeOnly` parameter of the tool's schema replaced by `[redacted]`."""
        if args is None:
            return None
        return _shown(self._tools.get(tool), args, _not_json(args))

    def recent(self) -> tuple[ToolExecution, ...]:
        """The last `RING_SIZE` (1000) calls handled, oldest first."""
        return tuple(
            ToolExecution(tool=name, args=args, ran=ran, success=ok, error=error, duration=took)
            for name, args, ran, ok, error, took in self._recent
        )

    async def execute(
        self, call: FunctionCall, context: ToolContext, invocation: ToolInvocation
    ) -> ToolResult:
        """Refuse or run one call; a tool's failure is a result, cancellation propagates.

        The arguments are checked as JSON once, for the schema gate and the ring alike.
        """
        now = loop_clock()
        started = now()
        tool = self._tools.get(call.name)
        args = {} if call.args is None else call.args
        not_json = _not_json(args)
        ran, result = False, None
        try:
            if tool is None:
                result = _failure(self._unknown(call.name))
            elif (refusal := _refusal(tool, context, args, not_json)) is not None:
                result = _failure(refusal)
            else:
                ran = True
                tool_call = ToolCall(name=call.name, context=context, invocation=invocation)
                try:
                    result = await _run(tool, args, tool_call)
                except ArgumentError as error:  # raised before the function was called
                    ran = False
                    result = _failure(f'invalid arguments for tool "{call.name}": {error}')
            return result
        finally:
            shown = None if call.args is None else _shown(tool, args, not_json)
            self._recent.append(
                (
                    call.name,
                    _kept(shown),
                    ran,
                    result is not None and result.success,
                    "cancelled" if result is None else result.error,
                    now() - started,
                )
            )

    def _unknown(self, name: str) -> str:
        known = ", ".join(self._tools) or "none"
        shown = name if len(name) <= 64 else f"{name[:64]}…"  # 64: the longest valid name
        return f'unknown tool "{shown}"; the available tools are: {known}'


def _not_json(args: JsonObject) -> str | None:
    """What makes `args` not JSON (`json_policy.check_json`), or None when they are."""
    try:
        check_json(args, where="arguments")
    except JsonInputError as error:
        return error.problem
    return None


def _shown(tool: RegisteredTool | None, args: JsonObject, not_json: str | None) -> JsonObject:
    """`args` as logs and the ring show them: secrets redacted; not JSON, only why it is not."""
    if not_json is not None:  # too deep to walk, or not JSON: nothing of it is shown
        return {REDACTED: not_json}
    if tool is None or not tool.has_secrets:
        return args
    redacted: JsonObject = redact(args, tool.spec.parameters)
    return redacted


def _refusal(
    tool: RegisteredTool, context: ToolContext, args: JsonObject, not_json: str | None
) -> str | None:
    """Why a gate or the schema refuses the call, in the order SPEC 6 step 6 gives.

    `not_json` is what `_not_json` found wrong with `args`.
    """
    name = tool.spec.name
    try:
        supported = tool.supports(context.provider)
        available = name not in context.unavailable_for_turn and tool.available(context)
    except Exception as error:  # the bot's own gate failed: the call cannot be allowed
        return f'tool "{name}" cannot be checked: its gate raised {type(error).__name__}'
    if not supported:
        return f'tool "{name}" is not available for provider {context.provider_name}'
    if not available:
        return f'tool "{name}" is not available for the current turn, do not retry it this turn'
    if not_json is not None:
        return f'invalid arguments for tool "{name}": {not_json}'
    try:
        if tool.accepts(args):
            return None
        broken = list(dict.fromkeys(problems(tool.validator, args)))
    except Exception as error:  # a schema fault jsonschema only finds on use (a `$ref` cycle)
        return (
            f'tool "{name}" cannot check its arguments: its schema fails ({type(error).__name__})'
        )
    if broken:
        return f'invalid arguments for tool "{name}": ' + "; ".join(broken)
    return None


async def _run(tool: RegisteredTool, args: JsonObject, call: ToolCall) -> ToolResult:
    """Run the tool's code; what it raises or returns wrongly becomes a failure."""
    try:
        returned = await tool.function(args, call)
    except ArgumentError:  # a typed tool's arguments, before its code ran: `execute` answers
        raise
    except Exception as error:
        # The bot's author needs the traceback; the model reads only the type and message.
        log.error(
            'tool "%s" raised %s; arguments %s',
            call.name,
            type(error).__name__,
            json.dumps(_shown(tool, args, None), default=repr)[:MAX_KEPT_ARGS_CHARS],
            exc_info=error,
        )
        text = str(error).encode("utf-8", "replace").decode()  # a lone surrogate becomes "?"
        message = _shorten(text, MAX_ERROR_CHARS)
        return _failure(f'tool "{call.name}" raised {type(error).__name__}: {message}')
    if returned is None:
        return ToolResult(success=True)
    if isinstance(returned, dict):
        returned = ToolResult(success=True, data=returned)
    if not isinstance(returned, ToolResult):
        kind = type(returned).__name__
        return _failure(
            f'tool "{call.name}" returned a {kind}, expected a ToolResult, a dict or None'
        )
    return _checked(call.name, returned)


def _checked(name: str, result: ToolResult) -> ToolResult:
    """`result` if what the model reads of it is JSON, cut to `MAX_RESULT_CHARS`; else a failure.

    The data is cut as JSON text; `error` and `message` as text.
    """
    data, error, message, metadata = (
        result.data,
        result.error,
        result.message,
        result.image_metadata,
    )
    try:  # each by itself: a loop over the four costs more than the usual one check
        if data is not None:
            check_json(data, where="data")
        if metadata is not None:
            check_json(metadata, where="image_metadata")
        if error is not None:
            check_json(error, where="error")
        if message is not None:
            check_json(message, where="message")
    except JsonInputError as refused:
        return _failure(
            f'tool "{name}" returned {refused.where} that is not JSON: {refused.problem}'
        )
    if (error is not None and len(error) > MAX_RESULT_CHARS) or (
        message is not None and len(message) > MAX_RESULT_CHARS
    ):
        error = error and _shorten(error, MAX_RESULT_CHARS)
        message = message and _shorten(message, MAX_RESULT_CHARS)
        result = attrs.evolve(result, error=error, message=message)
    if data is None:
        return result
    text = _to_json(data)
    if len(text) <= MAX_RESULT_CHARS:
        return result
    marker = f"[cut: {len(text)} characters of JSON, the first {MAX_RESULT_CHARS} kept]"
    return attrs.evolve(result, data=f"{text[:MAX_RESULT_CHARS]} {marker}")


def _kept(args: JsonObject | None) -> JsonObject | None:
    """Redacted arguments as the ring keeps them: beyond `MAX_KEPT_ARGS_CHARS`, only their size."""
    if args is None:
        return None
    size = len(_to_json(args))
    return args if size <= MAX_KEPT_ARGS_CHARS else {REDACTED: f"{size} characters of arguments"}


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [cut at {limit} characters]"


def _failure(error: str) -> ToolResult:
    return ToolResult(success=False, error=error)


def _description(function: ToolFunction) -> str:
    return inspect.getdoc(function) or ""


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise ToolSchemaError(name, f"must be {NAME_RULE}", "name")
    return name


def _timeout_ms(tool: str, timeout: float | None) -> int | None:
    """A tool's own timeout in ms; a value that is not a number above zero is refused."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        problem = f"must be a number of seconds above zero (got {timeout!r})"
        raise ToolSchemaError(tool, problem, "timeout")
    if not math.isfinite(timeout):
        raise ToolSchemaError(tool, f"must be finite (got {timeout!r})", "timeout")
    return max(1, round(timeout * 1000))


def _provider_gate(providers: Collection[ApiFamily] | ProviderGate | None) -> ProviderGate:
    if providers is None:
        return _always
    if callable(providers):
        return providers
    families = frozenset(providers)
    return lambda provider: provider.api_family in families


def _approval_rule(tool: str, requires: bool | ApprovalRule) -> ApprovalRule | None:
    """`requires_approval` as a rule, or None when no call needs approval."""
    if requires is True:
        return _always_approval
    if requires is False:
        return None
    if not callable(requires):
        raise ToolSchemaError(
            tool,
            f"requires_approval must be a bool or a callable (args, context) -> bool, "
            f"got {type(requires).__name__}",
            "requires_approval",
        )
    return requires


def _always_approval(args: JsonObject, context: ToolContext) -> bool:
    return True


def _follow_up_rule(requires_follow_up: bool | FollowUpRule) -> FollowUpRule:
    if callable(requires_follow_up):
        return requires_follow_up
    return lambda provider, server: requires_follow_up


def _always(_: Any) -> bool:
    return True
