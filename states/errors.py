"""The root of every error toolloop raises, and the family drawn in one place.

Each error class derives from `ToolloopError` and from the builtin it has
always been (`ValueError` for bad input, `RuntimeError` for a broken run, ...),
so `except ToolloopError` catches everything the library raises on purpose
and `except ValueError` keeps working where it did. The three kinds any floor
may raise live here; the others live beside the code that raises them.

The family (the builtin each also derives from in parentheses, then its module
under `toolloop.`; tests/states/test_errors.py keeps this drawing true)::

    ToolloopError
      InvalidOption (ValueError)                 states.errors
      UsageError (RuntimeError)                  states.errors
      BrokenInvariant (AssertionError)           states.errors
      JsonInputError (ValueError)                states.json_policy
      NonJsonConstant (ValueError)               states.json_policy
      UnknownField (AttributeError)              engine.draft
      BadRow (ValueError)                        engine.table
      InvalidEvent (RuntimeError)                engine.step
      NotResumable (ValueError)                  engine.resume
      TraceError (ValueError)                    engine.trace
      TraceMismatch (ValueError)                 engine.trace
      DeclarationError (ValueError)              specs.machine
        UnknownPhase                             specs.machine
        UnknownEvent                             specs.machine
        UnknownGuard                             specs.machine
        DuplicateMove                            specs.machine
        UnreachablePhase                         specs.machine
        TrapPhase                                specs.machine
      NoWitness (LookupError)                    specs.paths
      ConflictingWitnesses (ValueError)          specs.paths
      GraphvizMissing (RuntimeError)             specs.diagram
      GraphvizFailed (RuntimeError)              specs.diagram
      UndeclaredMove (ValueError)                specs.diagram
      ImpersonationAborted (RuntimeError)        effects.interpreter.errors
      NoApprovalsPort (TypeError)                effects.interpreter.errors
      CoreMismatch (TypeError)                   effects.interpreter.errors
      RetryableError                             effects.turn
      UnknownNotice (KeyError)                   effects.notices
      NotRegistered (KeyError)                   effects.registry.tool_registry
      NoSuchRequest (LookupError)                effects.approvals
      ToolSchemaError (ValueError)               effects.registry.schema
      ArgumentError (ValueError)                 effects.registry.signature
      SignatureError (TypeError)                 effects.registry.signature
      DeliveryError (RuntimeError)               effects.discord.writer
      MissingSetting (ValueError)                effects.discord.settings
      BadSetting (ValueError)                    effects.discord.settings
      McpServerError (RuntimeError)              effects.mcp.source
      StreamBroken (RuntimeError)                effects.providers.sse
      JournalError (ValueError)                  effects.durable.journal
      TurnInProgress (ValueError)                effects.durable.journal
      ReplayError (ValueError)                   effects.durable.replay
      ForeignPayload (ValueError)                effects.temporal.convert
      UnknownExit (LookupError)                  effects.inspect.machine
      TokenRequired (ValueError)                 effects.inspect.server
      ServeFailed (OSError)                      effects.inspect.server
      ScriptExhausted (RuntimeError)             testing.scripted
      ScriptedProviderError (RuntimeError)       tools.scripted
      ScriptedToolError (RuntimeError)           tools.scripted
      ChannelRefusedError (RuntimeError)         tools.scripted
      ScenarioError (ValueError)                 tools.scenario_json
      BadKey (ValueError)                        tools.demo_model
      DemoInputError (ValueError)                tools.demo_tools
"""

__all__ = ["BrokenInvariant", "InvalidOption", "ToolloopError", "UsageError"]


class ToolloopError(Exception):
    """An error raised by toolloop; its message says what went wrong and where."""


class InvalidOption(ToolloopError, ValueError):
    """A value given to set something up (a constructor's option, a limit, a key, a
    format) that could never work; refused when given, not when first used."""


class UsageError(ToolloopError, RuntimeError):
    """An object used outside the order it works in: fed after it ended, or outside
    the `async with` that runs it."""


class BrokenInvariant(ToolloopError, AssertionError):
    """A rule toolloop's own code keeps was broken (a place it cannot reach was
    reached): a bug in toolloop, to report."""
