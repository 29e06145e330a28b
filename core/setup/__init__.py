"""``main.py setup``: the wizard, its scripted form, and the file writers behind it."""

from core.setup.command import add_setup_arguments, run_setup_command
from core.setup.plan import SetupPlan
from core.setup.settings_file import write_changes

__all__ = ["SetupPlan", "add_setup_arguments", "run_setup_command", "write_changes"]
