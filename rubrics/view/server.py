"""`rubric view` without --static: the page on http://127.0.0.1:PORT/, from the standard library's HTTP server.

Every request of "/" reads the files again, so reloading the page after a regrade shows the new results. Only
127.0.0.1 is bound, and a request whose Host is not this address (a DNS-rebinding page elsewhere) is refused. A
connection that sends nothing for REQUEST_TIMEOUT_S is closed, so half-open connections cannot hold its threads,
and the page may not be framed by another page (X-Frame-Options, CSP frame-ancestors).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"
REQUEST_TIMEOUT_S = 10.0


def make_server(page: Callable[[], str], port: int, timeout_s: float = REQUEST_TIMEOUT_S) -> ThreadingHTTPServer:
    """Bound and listening (port 0: any free port; the server's server_address says which)."""

    class Handler(BaseHTTPRequestHandler):
        timeout = timeout_s   # on the connection's socket: a read that waits longer ends the connection

        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            bound = self.server.server_address[1]
            if self.headers.get("Host", "") not in (f"{HOST}:{bound}", f"localhost:{bound}"):
                self._send(421, "text/plain; charset=utf-8", b"this server answers 127.0.0.1 only\n")
                return
            if self.path.split("?")[0] not in ("/", "/index.html"):
                self._send(404, "text/plain; charset=utf-8", b"not found: the page is at /\n")
                return
            try:
                body = page().encode("utf-8")
            except Exception as exc:  # noqa: BLE001 - the files changed under us: say why, keep serving
                self._send(500, "text/plain; charset=utf-8", f"cannot build the page: {exc}\n".encode())
                return
            self._send(200, "text/html; charset=utf-8", body)

        def _send(self, code: int, content_type: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Content-Security-Policy", "frame-ancestors 'none'")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - the http.server signature
            pass   # a request log per page load is noise in a terminal that shows the URL to open

    server = ThreadingHTTPServer((HOST, port), Handler)
    server.daemon_threads = True
    return server


def serve(page: Callable[[], str], port: int, open_browser: bool) -> int:
    try:
        server = make_server(page, port)
    except OSError as exc:
        print(f"error: cannot listen on {HOST}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    url = f"http://{HOST}:{server.server_address[1]}/"
    print(f"rubric view: serving on {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
