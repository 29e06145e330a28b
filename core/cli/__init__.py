"""Implementations of the ``main.py`` subcommands."""
