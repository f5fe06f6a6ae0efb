"""A live web page of the process's turns (`toolloop-engine[inspect]`, docs/inspect.md)."""

from toolloop.effects.inspect import Inspector, Running, TokenRequired, TurnView, serve_in_thread

__all__ = ["Inspector", "Running", "TokenRequired", "TurnView", "serve_in_thread"]
