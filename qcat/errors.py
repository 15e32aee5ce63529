"""qcat's own exception types.

Every error a user can cause (a bad file, a bad row, an empty query, an unknown or
tampered model directory) raises one of these with a message that names the file,
row or value. The CLI prints the message on one line and exits non-zero.
"""


class QcatError(Exception):
    """Base class of every error a user can cause."""


class InputError(QcatError):
    """A file, row or value supplied by the user cannot be used."""


class EmptyQueryError(InputError):
    """A query is empty after normalization."""


class TaxonomyError(InputError):
    """A taxonomy file is malformed or inconsistent."""


class BundleError(QcatError):
    """A model bundle is missing, unreadable, tampered with or of an unknown format."""
