"""`toolloop inspect`: a live web page of the process's turns on the declared machine.

`Inspector` holds the turns (`watch` one to show it), `serve_in_thread` serves
the page beside the bot (`toolloop-engine[inspect]`: Starlette and uvicorn).
"""

from toolloop.effects.inspect.board import Inspector, TurnView
from toolloop.effects.inspect.server import Running, TokenRequired, serve_in_thread

__all__ = ["Inspector", "Running", "TokenRequired", "TurnView", "serve_in_thread"]
