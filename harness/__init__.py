"""harness: clusters, runs, campaigns, the matrix and reports; composes the workloads, the
nemeses and the checkers."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kafka-eos-harness")
except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
    __version__ = "0+unknown"
