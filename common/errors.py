"""The one exception type that the CLI turns into a single line and exit status 2.

Bad input (an unknown Kafka version, Java missing, a port in use) must never surface as a
traceback: the user gets one sentence that says what is wrong and what to do about it.
"""

from __future__ import annotations

import argparse
from typing import NoReturn


class HarnessError(Exception):
    """A failure the user can act on; its message is one line and is shown as is."""

    exit_code = 2


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line and exit status 2, like a
    :class:`HarnessError`: argparse's own prints the usage block before the error."""

    def error(self, message: str) -> NoReturn:
        self.exit(HarnessError.exit_code, f"{self.prog}: error: {message}\n")
