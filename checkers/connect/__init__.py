"""The connect family: checks of the exactly-once source connector's runs (KIP-618).

Parts, as in every family: ``extract`` (rows from the history and the final reads),
``checks`` (the Spark engine of record), ``pyref`` (the plain-Python reference the tests hold
equal to it), ``results`` (types, examples and the result shape both engines build).
"""
