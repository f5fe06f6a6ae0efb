"""Build, once per machine, the two llama.cpp servers the `servers` suite runs.

Usage: ``python -m tests.servers.build [--only python|cpp] [--print]``.

Both builds come from the same PyPI source package of llama-cpp-python, which
vendors the llama.cpp tree:

* llama-cpp-python's server: the sdist is compiled into a wheel (cached), and
  the wheel is installed with its ``[server]`` extra into a dedicated venv;
* llama.cpp's own C++ ``llama-server``: configured from ``vendor/llama.cpp``
  with the web UI download and curl off, only the ``llama-server`` target.

Everything lives under the cache directory (``TOOLLOOP_SERVERS_CACHE``, else
``$XDG_CACHE_HOME/toolloop/servers``, else ``~/.cache/toolloop/servers``), and a
step whose stamp file exists is skipped, so a rerun takes about a second.
Each step's wall time is recorded in ``build-times.json`` there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
# Portable x86-64 code: the cache may be reused by CI on another processor.
CMAKE_ARGS = "-DGGML_NATIVE=OFF"
SERVER_CMAKE_ARGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_CURL=OFF",
    "-DGGML_NATIVE=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
]


def cache_dir() -> Path:
    """Return the directory that holds every cached build."""
    explicit = os.environ.get("TOOLLOOP_SERVERS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolloop" / "servers"


def sdist_path() -> Path:
    """Return where the llama-cpp-python source package is kept."""
    return cache_dir() / "sdist" / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"


def python_venv() -> Path:
    """Return the venv that has llama-cpp-python[server] installed."""
    return cache_dir() / f"venv-llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}"


def python_server_python() -> Path:
    """Return the interpreter that runs ``python -m llama_cpp.server``."""
    return python_venv() / "bin" / "python"


def llama_server_binary() -> Path:
    """Return the path of the built C++ llama-server executable."""
    return cache_dir() / "bin" / f"llama-server-{LLAMA_CPP_PYTHON_VERSION}"


def _python_stamp() -> Path:
    return python_venv() / ".toolloop-complete"


def python_server_ready() -> bool:
    """Tell whether llama-cpp-python's server is installed in the cached venv."""
    return _python_stamp().is_file() and python_server_python().is_file()


def cpp_server_ready() -> bool:
    """Tell whether the C++ llama-server has been built."""
    return llama_server_binary().is_file()


def _run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env, cwd=cwd)


def _record(step: str, seconds: float) -> None:
    path = cache_dir() / "build-times.json"
    times: dict[str, float] = {}
    if path.is_file():
        times = json.loads(path.read_text())
    times[step] = round(seconds, 1)
    path.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")
    print(f"[build] {step}: {seconds:.1f}s", flush=True)


def _jobs() -> str:
    return str(os.cpu_count() or 2)


def fetch_sdist() -> Path:
    """Download the llama-cpp-python source package unless it is cached."""
    target = sdist_path()
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(target.parent),
            f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
        ]
    )
    _record("download sdist", time.monotonic() - started)
    return target


def _wheel_dir() -> Path:
    return cache_dir() / "wheels"


def _cached_wheel() -> Path | None:
    wheels = sorted(_wheel_dir().glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}-*.whl"))
    return wheels[0] if wheels else None


def build_python_server() -> None:
    """Compile the llama-cpp-python wheel (cached) and install it into its venv."""
    if python_server_ready():
        return
    sdist = fetch_sdist()
    wheel = _cached_wheel()
    if wheel is None:
        started = time.monotonic()
        env = dict(os.environ, CMAKE_ARGS=CMAKE_ARGS, CMAKE_BUILD_PARALLEL_LEVEL=_jobs())
        _wheel_dir().mkdir(parents=True, exist_ok=True)
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "-w",
                str(_wheel_dir()),
                str(sdist),
            ],
            env=env,
        )
        _record("compile llama-cpp-python wheel", time.monotonic() - started)
        wheel = _cached_wheel()
        if wheel is None:
            raise SystemExit("pip wheel produced no llama_cpp_python wheel")
    started = time.monotonic()
    venv = python_venv()
    if venv.exists():
        shutil.rmtree(venv)
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(python_server_python()), "-m", "pip", "install", "-q", f"{wheel}[server]"])
    _python_stamp().write_text(f"{wheel.name}\n")
    _record("install llama-cpp-python[server] venv", time.monotonic() - started)


def _source_tree() -> Path:
    return cache_dir() / f"src-llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}"


def _extract_sdist(sdist: Path) -> Path:
    tree = _source_tree()
    stamp = tree / ".toolloop-extracted"
    root = tree / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}"
    if stamp.is_file():
        return root
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        archive.extractall(tree, filter="data")
    stamp.write_text("ok\n")
    return root


def build_cpp_server() -> None:
    """Build llama.cpp's ``llama-server`` from the tree vendored in the sdist."""
    if cpp_server_ready():
        return
    root = _extract_sdist(fetch_sdist())
    source = root / "vendor" / "llama.cpp"
    build = cache_dir() / f"build-llama-server-{LLAMA_CPP_PYTHON_VERSION}"
    started = time.monotonic()
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    _run(["cmake", "-S", str(source), "-B", str(build), *generator, *SERVER_CMAKE_ARGS])
    _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", _jobs()])
    built = build / "bin" / "llama-server"
    target = llama_server_binary()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, target.with_suffix(".tmp"))
    target.with_suffix(".tmp").rename(target)
    _record("build llama-server", time.monotonic() - started)


def paths() -> dict[str, str]:
    """Return the paths the test fixtures use, for ``--print``."""
    return {
        "cache": str(cache_dir()),
        "llama_cpp_python": str(python_server_python()),
        "llama_server": str(llama_server_binary()),
    }


def main(argv: list[str] | None = None) -> int:
    """Build what is missing and report where it is."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["python", "cpp"], help="build one server only")
    parser.add_argument("--print", action="store_true", help="print the paths as JSON")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.only in (None, "python"):
        build_python_server()
    if args.only in (None, "cpp"):
        build_cpp_server()
    print(f"[build] servers ready in {time.monotonic() - started:.1f}s", flush=True)
    if args.print:
        print(json.dumps(paths(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
