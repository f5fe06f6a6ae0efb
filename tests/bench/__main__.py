"""Run every benchmark module of this package and print its figures."""

import importlib
import pkgutil
import sys
from collections.abc import Iterable

import tests.bench as package


def modules(path: Iterable[str]) -> list[str]:
    """The benchmark modules (`bench_*`) under `path`, by name."""
    return sorted(
        info.name for info in pkgutil.iter_modules(path) if info.name.startswith("bench_")
    )


def main() -> None:
    only = set(sys.argv[1:])
    for name in modules(package.__path__):
        if not only or name in only:
            print(f"== {name}", flush=True)
            importlib.import_module(f"tests.bench.{name}").main()


if __name__ == "__main__":
    main()
