"""The names toolloop's telemetry uses: the GenAI semantic conventions' and its own.

The GenAI conventions are still "Development". toolloop follows them as
released with semantic-conventions v1.41.0 (the last release before they moved
to their own repository, open-telemetry/semantic-conventions-genai), plus that
repository's `gen_ai.response.time_to_first_chunk`. The names are written here
rather than imported from `opentelemetry-semantic-conventions`, whose GenAI
module is marked incubating and changes between its pre-releases.
"""

from __future__ import annotations

from toolloop.states import StreamStatus

SEMCONV_VERSION = "1.41.0"
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' opt-in for message content, tool arguments and results: "true" records them."""

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOKEN_TYPE = "gen_ai.token.type"

OPERATION_DURATION = "gen_ai.client.operation.duration"
TOKEN_USAGE = "gen_ai.client.token.usage"

# toolloop's own, under its namespace.
REASONING_TOKENS = "toolloop.usage.reasoning_tokens"
"""Of the output tokens, those the model spent reasoning (v1.41.0 names no attribute for it)."""
ATTEMPT = "toolloop.attempt"
ITERATION = "toolloop.iteration"
STREAM_STATUS = "toolloop.stream.status"
TURN_STATUS = "toolloop.turn.status"
TURN_ATTEMPTS = "toolloop.turn.attempts"
TOOL_OUTCOME = "toolloop.tool.outcome"
MOVE = "toolloop.move"
RULE = "toolloop.rule"
SOURCE = "toolloop.phase.source"
DEST = "toolloop.phase.dest"
NOTICE_KEY = "toolloop.notice.key"
NOTICE_LEVEL = "toolloop.notice.level"
NOTICE_HIDDEN = "toolloop.notice.hidden"
NOTICE_TEXT = "toolloop.notice.text"

APPROVAL_TIMEOUT = "toolloop.approval.timeout_ms"
APPROVAL_VERDICT = "toolloop.approval.verdict"
APPROVAL_ACCEPTED = "toolloop.approval.accepted"
APPROVAL_BY = "toolloop.approval.by"
APPROVAL_REASON = "toolloop.approval.reason"
APPROVAL_OUTCOME = "toolloop.approval.outcome"

STEP_EVENT = "toolloop.step"
NOTICE_EVENT = "toolloop.notice"
APPROVAL_ASKED_EVENT = "toolloop.approval.asked"
APPROVAL_ANSWERED_EVENT = "toolloop.approval.answered"
APPROVAL_EXPIRED_EVENT = "toolloop.approval.expired"
APPROVAL_WITHDRAWN_EVENT = "toolloop.approval.withdrawn"
APPROVAL_WAIT_DURATION = "toolloop.approval.wait.duration"

FINISH_REASON = {
    StreamStatus.COMPLETED: "stop",
    StreamStatus.FUNCTION_CALL: "tool_call",
}
"""The conventions' finish reasons; every other stream status is reported as its own value."""

PROVIDER_NAMES = {"openai": "openai", "google": "gcp.gemini"}
"""Well-known `gen_ai.provider.name` values by API family; others report the provider's name."""
