"""The logs family: checks that read only the brokers' log dumps.

Parts, as in every family: ``checks`` (the Spark engine of record), ``pyref`` (the
plain-Python reference the tests hold equal to it), ``rules`` (what both share: reasons,
examples, the result shape), ``run`` (the checks on a run directory). Extraction and the
positions other families join with are :mod:`checkers.logdump`.
"""
