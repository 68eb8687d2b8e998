"""Servers in the background on 127.0.0.1: an ASGI app under uvicorn in a thread, or a server subprocess.

Used by the tests (fault servers, the engine server) and the load benchmark, and usable from a notebook to share
one engine with other processes on the same machine.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class BackgroundServer:
    """`with BackgroundServer(app) as server: httpx.get(server.url + "/v1/models")`."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None, startup_timeout_s: float = 30.0,
                 limits: Any = None, api_key: str | None = None):
        """limits: a judge_engine.server.connections.ConnectionLimits to serve under, as `rubric serve` does
        (timeouts, connection caps); None: plain uvicorn. api_key: the key the app asks for (with limits, a
        connection that has sent it is no longer a stranger that a newcomer may close)."""
        import uvicorn

        self.host = host
        self.port = port or free_port(host)
        # A short graceful-shutdown window: a test's hanging handler must not keep the thread alive.
        options = dict(log_level="warning", lifespan="auto", timeout_graceful_shutdown=2)
        if limits is not None:
            from judge_engine.server.connections import uvicorn_config

            config = uvicorn_config(app, self.host, self.port, limits, api_key=api_key, **options)
        else:
            config = uvicorn.Config(app, host=self.host, port=self.port, **options)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"uvicorn:{self.port}", daemon=True)
        self._startup_timeout_s = startup_timeout_s

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"uvicorn on {self.url} stopped during startup")
            if time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn on {self.url} did not start within {self._startup_timeout_s:g}s")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServerProcess:
    """`rubric serve ...` (or any server command) in a subprocess, ready once GET ready_path answers 200.

    The command must bind 127.0.0.1:port; output goes to log_path so a failed start can say why.
    """

    def __init__(self, command: list[str], port: int, log_path: str, startup_timeout_s: float = 300.0,
                 ready_path: str = "/health", env: dict[str, str] | None = None):
        self.command, self.port, self.log_path = command, port, log_path
        self.startup_timeout_s, self.ready_path, self.env = startup_timeout_s, ready_path, env
        self.process: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ServerProcess":
        import subprocess

        import httpx

        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{' '.join(self.command)} exited with {self.process.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                if httpx.get(self.url + self.ready_path, timeout=2.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{' '.join(self.command)} was not ready within {self.startup_timeout_s:g}s:\n"
                           f"{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        with open(self.log_path, "rb") as log:
            return log.read().decode(errors="replace")[-chars:]

    def stop(self, timeout_s: float = 15.0) -> None:
        import subprocess

        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
