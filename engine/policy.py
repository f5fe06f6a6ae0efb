"""The exit policy after visible pre-tool text (SPEC 7) and the predicates it keys on.

These predicates are the guards the declared machine in `toolloop.specs` names.
"""

from toolloop.states import SUPPRESS_FOLLOW_UP_AFTER_PRE_TOOL_TEXT, ApiFamily, ProviderDescriptor

SHORT_TERM_MEMORY_TOOL = "update_short_term_memory"
STICKER_TOOL = "select_sticker_for_response"


def is_visible(text: str) -> bool:
    """Text counts as visible when it is not blank after trimming."""
    return bool(text.strip())


# Read on every settled tool, so a module name: a member read off its Enum class is
# a class attribute lookup, about 900 instructions on CPython 3.11.
_NOVELAI = ApiFamily.NOVELAI


def is_novelai(provider: ProviderDescriptor) -> bool:
    """The provider belongs to the NovelAI API family (never matched by name)."""
    return provider.api_family is _NOVELAI


def should_end_after_pre_tool_text(
    provider: ProviderDescriptor, tool: str, requires_follow_up: bool, pre_tool_text: str
) -> bool:
    """Whether a successful tool ends the turn with the text already delivered."""
    if not is_visible(pre_tool_text):
        return False
    if is_novelai(provider):
        return tool == SHORT_TERM_MEMORY_TOOL or not requires_follow_up
    if tool in SUPPRESS_FOLLOW_UP_AFTER_PRE_TOOL_TEXT:
        return not requires_follow_up
    return False
