"""The supervisor: runs the kernel as a child process and keeps it running."""

from core.supervisor.run import (
    EXIT_ALREADY_RUNNING,
    EXIT_GAVE_UP,
    EXIT_OK,
    default_kernel_argv,
    run_supervisor,
)

__all__ = [
    "EXIT_ALREADY_RUNNING",
    "EXIT_GAVE_UP",
    "EXIT_OK",
    "default_kernel_argv",
    "run_supervisor",
]
