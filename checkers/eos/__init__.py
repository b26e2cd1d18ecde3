"""The eos family: checks of the consume-transform-produce workload's histories.

Parts, as in every family: ``extract`` (typed tables from the history scan), ``views`` (the
tables joined into what the rules read), ``checks`` (the Spark engine of record), ``pyref``
(the plain-Python reference the tests hold equal to it), ``results`` (types, examples and the
result shape both engines build). ``frames`` and ``rules`` are the Spark rules' inputs and
bodies, ``log`` the broker log dump joined with a run.
"""
