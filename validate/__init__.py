"""gpuready.validate: check catalogues (node, cluster, vSphere, training) and their runners."""
