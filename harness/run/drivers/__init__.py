"""One driver per workload: how a run executes it on a started cluster with the nemeses.

Each module defines ``WORKLOAD`` (a ``harness.run.drive.Workload``); ``harness.run.workloads``
is the registry that lists them.
"""
