"""Talking to the Connect workers: one REST call, its error, and the ports they listen on."""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.error
import urllib.request
from typing import Any

#: A REST call that takes longer than this failed (the worker is paused, dead or busy).
REST_TIMEOUT_S = 5.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RestError(Exception):
    """A REST call that did not succeed: ``code`` is the HTTP status or a transport error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def as_error(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message[:300]}


def rest_call(port: int, method: str, path: str, body: Any = None) -> Any:
    """One call to a worker's REST API; the decoded JSON answer (None for an empty one)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=REST_TIMEOUT_S) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")
        with contextlib.suppress(ValueError):
            text = json.loads(text).get("message", text)
        raise RestError(f"HTTP_{exc.code}", str(text)) from None
    except (OSError, TimeoutError) as exc:
        raise RestError(type(exc).__name__, str(exc)) from None
    return json.loads(raw) if raw.strip() else None


def port_of(worker_id: Any) -> int | None:
    if not isinstance(worker_id, str) or ":" not in worker_id:
        return None
    try:
        return int(worker_id.rsplit(":", 1)[1])
    except ValueError:
        return None
