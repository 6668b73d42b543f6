"""The shipped inventories (local/, the embedded default, and one example per environment), as package data.

``gpuready.core.command`` falls back to ``local/`` here when ./inventories/local does not exist.
"""
