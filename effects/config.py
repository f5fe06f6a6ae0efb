"""Loading the configuration (SPEC section 2): parse it, and log every warning once.

`load_config` is what a bot calls: it reads the process environment (or the
mapping given), parses it with `toolloop.engine.config.parse_config` and logs
each `ConfigWarning` once, at WARNING, on this module's logger, so a typo in a
variable is never silent; the warnings are returned as well.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from toolloop.engine.config import VARIABLES, LoadedConfig, parse_config

log = logging.getLogger(__name__)


def load_config(env: Mapping[str, object] | None = None) -> LoadedConfig:
    """The configuration from `env` (default: the process environment), its warnings logged."""
    loaded = parse_config(os.environ if env is None else env)
    for warning in loaded.warnings:
        variable = VARIABLES[warning.variable]
        log.warning(
            "%s=%s is not an integer from %d to %d; using %d",
            warning.variable,
            warning.value,
            variable.minimum,
            variable.maximum,
            warning.used,
        )
    return loaded
