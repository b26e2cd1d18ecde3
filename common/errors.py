"""The one exception type that the CLI turns into a single line and exit status 2.

Bad input (an unknown Kafka version, Java missing, a port in use) must never surface as a
traceback: the user gets one sentence that says what is wrong and what to do about it.
"""

from __future__ import annotations


class HarnessError(Exception):
    """A failure the user can act on; its message is one line and is shown as is."""

    exit_code = 2
