"""qcat's version, on the bottom floor so that bundles and the server can record it without
importing the package's front door (:mod:`qcat`, which re-exports it)."""

__version__ = "0.1.0"
