"""Polling waits: every wait in the harness is a condition with a deadline and a message.

Sleeping a fixed time and hoping is how flaky suites are made; instead we poll a predicate
quickly and fail with a message that says what was being waited for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """The condition did not hold before the deadline."""


def wait_for(
    predicate: Callable[[], T],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    max_interval: float = 1.0,
    fatal: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns a truthy value and return that value.

    Exceptions raised by the predicate count as "not yet" (a broker that is still starting
    refuses connections); the last one is chained to the timeout to help diagnosis. One of
    the ``fatal`` types ends the wait at once: waiting longer cannot help.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    delay = interval
    while True:
        try:
            result = predicate()
            if result:
                return result
        except fatal:
            raise
        except Exception as exc:  # any failure means "not ready yet"
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc})" if last_exc else ""
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(delay)
        delay = min(delay * 1.5, max_interval)
