"""Loading the configuration (SPEC section 2): parse it, and log every warning once.

`load_config` is what a bot calls: it reads the process environment (or the
mapping given), parses it with `toolloop.engine.config_parsing.parse_config` and logs
each `ConfigWarning` once, at WARNING, on this module's logger, so a typo in a
variable is never silent; the warnings are returned as well. The value is
logged quoted with Python's escapes (`repr`), since it is whatever the
environment held: a newline in it must not forge a second log line, nor an
escape sequence reach the terminal that shows the log.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping

from toolloop.engine.config_parsing import VARIABLES, LoadedConfig, parse_config
from toolloop.states import LoopConfig

log = logging.getLogger(__name__)


def load_config(env: Mapping[str, object] | None = None) -> LoadedConfig:
    """The configuration from `env` (default: the process environment), its warnings logged."""
    loaded = parse_config(os.environ if env is None else env)
    for warning in loaded.warnings:
        variable = VARIABLES[warning.variable]
        log.warning(
            "%s=%r is not an integer from %d to %d; using %d",
            warning.variable,
            warning.value,
            variable.minimum,
            variable.maximum,
            warning.used,
        )
    return loaded


def environment_config() -> LoopConfig:
    """The process environment's configuration; its warnings logged once per distinct value.

    A bot runs many turns: re-reading is cheap, logging the same typo on every
    turn is not, so the parse is cached on the variables' current values.
    """
    return _loaded(tuple((name, os.environ.get(name)) for name in VARIABLES)).config


@functools.lru_cache(maxsize=8)
def _loaded(values: tuple[tuple[str, str | None], ...]) -> LoadedConfig:
    return load_config({name: value for name, value in values if value is not None})
