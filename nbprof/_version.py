"""nbprof's version: read by the package, the CLI, the table cache and the wheel's metadata
(pyproject.toml), so it is written once. A module of its own, so that reading it imports
nothing else of nbprof's."""

__version__ = "0.1.0"
