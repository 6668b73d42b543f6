"""gpuready.core: CLI, inventory and settings, errors, the ansible-runner boundary, results."""

__version__ = "0.1.0"
