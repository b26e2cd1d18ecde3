"""The small base every room may import: errors (and the one-line argument parser), polling
waits, /proc look-ups and ``KEY=VALUE`` command-line settings.

``workloads``, ``nemeses``, ``checkers`` and ``history`` depend on this package and never on
``harness``; the harness composes them.
"""
