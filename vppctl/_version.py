"""The version, in one place: the package metadata, `--version` and the written plan read it."""

__version__ = "0.2.0"
