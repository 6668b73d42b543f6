"""gpuready.workloads: the CheXNet training workload, its input pipeline and launchers."""
