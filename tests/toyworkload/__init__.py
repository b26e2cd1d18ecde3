"""A toy workload, kept as the proof that a new workload is its package plus one registry line.

It is everything a workload package holds, at its smallest: its options and declaration
(``driver.SPEC``), its fault-facing client object (``control``) and its driver
(``driver.WORKLOAD``). One process sends values to a topic, each in a transaction of its own,
for the run's time limit; a fresh read_committed consumer then reads every partition to its
end. The history has the queue workload's shape, so the existing ``queue`` checker suite
judges it: no checker, runner, CLI or report module knows this package.
"""
