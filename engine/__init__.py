"""The pure core: events in, effects out, and `step` between them (SPEC sections 4 to 8).

Nothing here does I/O, reads a clock or knows about trio or asyncio; it
imports only `toolloop.states`. The interpreter in `toolloop.effects` carries
the effects out.
"""
