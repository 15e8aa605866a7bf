"""The command line (`vppctl`): the group and its one error handler (`base`), the program
commands (`program`: convert, verify, inspect, dump, sample) and the schedule commands
(`schedule`: simulate, plan). Importing this package registers every command on `cli`."""

from vppctl.cli import program, schedule
from vppctl.cli.base import cli, main

__all__ = ["cli", "main", "program", "schedule"]
