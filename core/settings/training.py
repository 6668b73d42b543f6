"""Training smoke-run settings and the performance references it is judged against."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuready.core.settings.base import Int, Real, Section


class TrainingReference(Section):
    """An inventory's training reference, ReFrame-style: the metric must lie in [target*(1+lower), target*(1+upper)]."""

    #: GPU model as nvidia-smi names it ("*": any)
    gpu_model: str = "*"
    #: the network the figure was measured with ("*": any)
    model: str = "*"
    #: workers (GPUs) the figure is for (none: any worker count, as for a per-GPU figure)
    gpus: Int | None = Field(default=None, ge=1)
    #: metric name; images_per_second is the total over all workers, images_per_second_per_gpu one worker's
    metric: str = "images_per_second"
    #: images per worker and step the figure was measured with (none: any)
    batch_size: Int | None = Field(default=None, ge=1)
    #: input side in pixels the figure was measured with (none: any)
    image_size: Int | None = Field(default=None, ge=32)
    #: "bf16"/"fp16" (mixed precision) or "fp32" ("*": any)
    precision: Literal["*", "bf16", "fp16", "fp32"] = "*"
    #: measured compiled (torch.compile, XLA) or eager (none: either)
    compiled: bool | None = None
    #: the expected value
    target: Real
    #: lowest acceptable, as a fraction of target (-0.1: 10% below)
    lower: Real = Field(default=-0.1, le=0)
    #: highest acceptable, as a fraction of target (none: no upper bound)
    upper: Real | None = None
    #: unit shown in reports
    unit: str = "images/s"
    #: where the figure comes from, shown beside every verdict it gives
    source: str = ""


class Training(Section):
    #: the network: CheXNet's DenseNet-121, or ResNet-50 (scales better, Dell's bare-metal vs Kubernetes study)
    model: Literal["densenet121", "resnet50"] = "densenet121"
    #: images per worker (GPU) and step
    batch_size: Int = Field(default=32, ge=1)
    #: side of the square input in pixels (CheXNet: 224)
    image_size: Int = Field(default=224, ge=32)
    #: timed steps per run
    steps: Int = Field(default=50, ge=1)
    #: steps run first and not timed (graph building, autotuning)
    warmup_steps: Int = Field(default=10, ge=0)
    #: "synthetic", or a folder of TFRecords made by `python -m gpuready.workloads.dataset.convert`
    data: str = "synthetic"
    #: tf.data pipeline for real data: "new" (Dell's CheXNet tuning article's, scales) or "old" (for comparison)
    pipeline: Literal["new", "old"] = "new"
    #: tensorflow (the train extra, Python 3.11) or pytorch (the torch extra: DDP under torchrun, any Python)
    framework: Literal["tensorflow", "pytorch"] = "tensorflow"
    #: tensorflow: horovod (Gloo or MPI), or mwms (tf.distribute MultiWorkerMirroredStrategy, no Horovod
    #: needed); pytorch always uses DistributedDataParallel
    distribution: Literal["horovod", "mwms"] = "horovod"
    #: where the workers run: this machine, over SSH, a Slurm job, or a Kubernetes MPIJob/TFJob
    launcher: Literal["local", "ssh", "slurm", "kubernetes"] = "local"
    #: the sweep: worker (GPU) counts to run, one run each
    gpus: list[Int] = Field(default_factory=lambda: [1])
    #: tensorflow: float16 compute with float32 master weights; pytorch: bf16 autocast
    mixed_precision: bool = False
    #: tensorflow: XLA auto-clustering (none: follow ``eager``, i.e. XLA on GPUs)
    xla: bool | None = None
    #: no graph compilation: neither torch.compile (pytorch) nor XLA (tensorflow). By default both compile
    #: on GPUs; workers on CPU run eagerly (compiling DenseNet-121 for the CPU takes minutes)
    eager: bool = False
    #: on GPUs, a size whose weak-scaling efficiency (images/s per worker against 1 worker's) is below this
    #: fails. 0.9: the seeds' vSphere study measured 96.8% at 4 nodes (10675.09 / (4 x 2757.21) images/s)
    scaling_floor: Real = Field(default=0.9, ge=0, le=1)
    #: held-out batches for the mean AUROC (real data only; 0: skip)
    eval_batches: Int = Field(default=0, ge=0)
    #: ssh launcher: horovodrun (Gloo) or mpirun --map-by socket (Dell's CheXNet tuning article's binding)
    ssh_runner: Literal["horovodrun", "mpirun"] = "horovodrun"
    #: slurm launcher: partition to submit to ("" for the cluster's default)
    slurm_partition: str = ""
    #: slurm launcher: the cluster's slurm.conf, passed to sbatch as SLURM_CONF ("" for the login node's own)
    slurm_conf: str = ""
    #: ssh and slurm launchers: workers per host (0: one per GPU of the host's node class)
    workers_per_host: Int = Field(default=0, ge=0)
    #: kubernetes launcher: MPIJob (kubeflow.org/v2beta1) or TFJob (kubeflow.org/v1); pytorch: a PyTorchJob
    kubernetes_job: Literal["mpijob", "tfjob"] = "mpijob"
    #: kubernetes launcher: the namespace the job runs in
    namespace: str = "default"
    #: kubernetes launcher: a container image with TensorFlow, Horovod and gpuready installed
    image: str = "nvcr.io/nvidia/tensorflow:24.01-tf2-py3"
    #: kubernetes launcher: seconds a submitted job may wait for its operator's first status; with none it is
    #: deleted again and the run skipped (a cluster without the mpi-operator or training-operator)
    operator_wait_s: Int = Field(default=60, ge=1)
    #: CPU threads per worker when a worker trains on CPU (0: the worker's share of its host's cores)
    cpu_threads: Int = Field(default=0, ge=0)
    #: seconds between the progress lines of a run (its step and images/s so far, from rank 0 only, so a
    #: sweep on 1000 nodes prints as few as on one); 0: none
    progress_s: Real = Field(default=30, ge=0)
    #: seconds one run (one size of the sweep) may take before it is stopped
    timeout_s: Int = Field(default=1800, ge=10)
    #: references checked before the published ones shipped with gpuready
    references: list[TrainingReference] = Field(default_factory=list)
