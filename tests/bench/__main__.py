"""Run every benchmark module of this package and print its figures."""

import importlib
import pkgutil
import sys

import tests.bench as package


def main() -> None:
    only = set(sys.argv[1:])
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.name.startswith("bench_") or (only and info.name not in only):
            continue
        print(f"== {info.name}", flush=True)
        importlib.import_module(f"tests.bench.{info.name}").main()


if __name__ == "__main__":
    main()
