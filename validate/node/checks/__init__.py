"""The catalogue, moving into one module per family of checks."""

from gpuready.validate.node.checks.gpu import *  # noqa: F403
