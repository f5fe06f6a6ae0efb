"""The interpreter's own errors: an aborted impersonation, a missing port, a broken core."""

from __future__ import annotations

from toolloop.engine import commands as fx
from toolloop.states.errors import ToolloopError


class ImpersonationAborted(ToolloopError, RuntimeError):
    """A turn under user impersonation failed too many tool calls in a row (SPEC 9).

    The loop raises it instead of returning a result: no notice may speak for
    the impersonated user.
    """


class NoApprovalsPort(ToolloopError, TypeError):
    """A call needs a person's approval (SPEC 6c), but the loop was given no approvals port."""


class CoreMismatch(ToolloopError, TypeError):
    """The engine asked for a step this interpreter cannot carry out: an effect it does
    not know, or a step that ends waiting for nothing (engine and interpreter disagree)."""


#: The error each `RaiseError` kind of the core is raised as.
RAISES: dict[fx.ErrorKind, type[ToolloopError]] = {
    fx.ErrorKind.IMPERSONATION_ABORTED: ImpersonationAborted
}
