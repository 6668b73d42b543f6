"""gpuready.provision: what each ``provision`` command runs and how it reports."""
