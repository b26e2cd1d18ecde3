"""The small base every room may import: errors, polling waits and /proc look-ups.

``workloads``, ``nemeses``, ``checkers`` and ``history`` depend on this package and never on
``harness``; the harness composes them.
"""
