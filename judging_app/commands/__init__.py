"""The ``qcat db`` and ``qcat judge`` commands, one module per group of actions; their parsers are
parsers.py and the entry point is :mod:`qcat.judging.cli`."""
