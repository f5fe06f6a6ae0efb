"""Where the core's effects are carried out: the ports, the interpreter and the real adapters.

The ports (`ports`) are what a host implements; the interpreter
(`interpreter.run_tool_loop`, `turn.run_generation_turn`) runs the core
against them on anyio, so under trio and inside asyncio bots alike.
"""
