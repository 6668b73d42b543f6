"""The GPU node check catalogue (testinfra), its parsers of nvidia-smi, and the parallel fan-out over hosts."""
