"""The training entry point one worker runs: ``python -m gpuready.workloads.tensorflow.train [options]``.

Launched once per GPU (horovodrun, mpirun, srun, an MPIJob or a TFJob); each process pins the
GPU of its local rank, trains for ``--steps``, times every step, and prints one line
``GPUREADY_RESULT {json}`` with its raw step times, so any launcher can collect the results from
the processes' output and every figure in the report can be recomputed from them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
from typing import Any

from gpuready.workloads.dataset.reading import Reading
from gpuready.workloads.worker import auroc, common_arguments, compiles, emit, evaluation, no_gpu, timed_steps

DISTRIBUTIONS = ("horovod", "mwms")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = common_arguments("python -m gpuready.workloads.tensorflow.train", __doc__)
    p.add_argument("--distribution", default="horovod", choices=DISTRIBUTIONS)
    p.add_argument("--mixed-precision", action="store_true")
    p.add_argument("--xla", action="store_true", help="the same as --compile on")
    args = p.parse_args(argv)
    if args.xla:
        args.compile = "on"
    return args


def _local_rank_and_size() -> tuple[int, int]:
    for rank, size in (
        ("HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
        ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
        ("GPUREADY_LOCAL_RANK", "GPUREADY_LOCAL_SIZE"),
    ):
        if rank in os.environ:
            return int(os.environ[rank]), int(os.environ.get(size, "1").split("(")[0])
    return 0, 1


def _configure_devices(tf: Any, local_rank: int, local_size: int, threads: int, cpu: bool) -> str:
    """One process per GPU: see only the local rank's GPU, so two workers never share one."""
    gpus = tf.config.list_physical_devices("GPU")
    if cpu:
        tf.config.set_visible_devices([], "GPU")
        gpus = []
    elif not gpus:
        no_gpu("tensorflow", f"TensorFlow {tf.__version__} lists no GPU")
    if gpus:
        gpu = gpus[local_rank % len(gpus)]
        tf.config.set_visible_devices(gpu, "GPU")
        tf.config.experimental.set_memory_growth(gpu, True)
        return f"GPU {tf.config.experimental.get_device_details(gpu).get('device_name', gpu.name)}"
    # On CPU the workers of a host share its cores; oversubscribing them only measures contention.
    threads = threads or max(1, (os.cpu_count() or 1) // local_size)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(max(1, min(2, threads)))
    return f"CPU ({threads} threads)"


def weights_digest(variables: list[Any]) -> str:
    digest = hashlib.sha256()
    for v in variables:
        digest.update(v.numpy().tobytes())
    return digest.hexdigest()


class Horovod:
    def __init__(self, tf: Any) -> None:
        import horovod.tensorflow as hvd

        hvd.init()
        self.hvd, self.tf = hvd, tf
        self.rank, self.size, self.local_rank, self.local_size = (
            hvd.rank(),
            hvd.size(),
            hvd.local_rank(),
            hvd.local_size(),
        )

    def scope(self) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def dataset(self, make: Any) -> Any:
        return iter(make(self.rank, self.size))

    def make_step(self, model: Any, optimizer: Any, loss_fn: Any, mixed: bool) -> Any:
        tf, hvd = self.tf, self.hvd

        @tf.function
        def step(iterator: Any) -> Any:
            images, labels = next(iterator)
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
                scaled = optimizer.get_scaled_loss(loss) if mixed else loss
            grads = hvd.DistributedGradientTape(tape).gradient(scaled, model.trainable_variables)
            if mixed:
                grads = optimizer.get_unscaled_gradients(grads)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        return step

    def broadcast(self, model: Any, optimizer: Any) -> None:
        self.hvd.broadcast_variables(model.variables, root_rank=0)
        variables = optimizer.variables
        self.hvd.broadcast_variables(variables() if callable(variables) else variables, root_rank=0)


class MultiWorkerMirrored:
    """tf.distribute for installs without Horovod; the cluster comes from TF_CONFIG."""

    def __init__(self, tf: Any) -> None:
        self.tf = tf
        config = json.loads(os.environ.get("TF_CONFIG", "{}"))
        workers = config.get("cluster", {}).get("worker", ["localhost"])
        self.rank, self.size = int(config.get("task", {}).get("index", 0)), len(workers)
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy()
        self.local_rank, self.local_size = _local_rank_and_size()

    def scope(self) -> Any:
        return self.strategy.scope()

    def dataset(self, make: Any) -> Any:
        def per_worker(ctx: Any) -> Any:
            return make(ctx.input_pipeline_id, ctx.num_input_pipelines)

        return iter(self.strategy.distribute_datasets_from_function(per_worker))

    def make_step(self, model: Any, optimizer: Any, loss_fn: Any, mixed: bool) -> Any:
        tf, strategy = self.tf, self.strategy

        def replica_step(images: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                per_example = loss_fn(labels, model(images, training=True))
                loss = tf.nn.compute_average_loss(per_example)  # over the global batch: sums to the mean
                scaled = optimizer.get_scaled_loss(loss) if mixed else loss
            grads = tape.gradient(scaled, model.trainable_variables)
            if mixed:
                grads = optimizer.get_unscaled_gradients(grads)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return tf.reduce_mean(per_example)  # this worker's own loss, like Horovod's

        @tf.function
        def step(iterator: Any) -> Any:
            return strategy.experimental_local_results(strategy.run(replica_step, args=next(iterator)))[0]

        return step

    def broadcast(self, model: Any, optimizer: Any) -> None:
        """Mirrored variables start identical: the strategy copies worker 0's initial values."""


def run(args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf

    local_rank, local_size = _local_rank_and_size()
    device = _configure_devices(tf, local_rank, local_size, args.threads, args.cpu)
    xla = compiles(args.compile, device.startswith("GPU"))
    if xla:
        # auto-clustering rather than jit_compile: collective ops (Horovod's) stay outside the clusters
        tf.config.optimizer.set_jit("autoclustering")
    if args.mixed_precision:
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    dist = Horovod(tf) if args.distribution == "horovod" else MultiWorkerMirrored(tf)

    from gpuready.workloads.tensorflow import data as pipeline
    from gpuready.workloads.tensorflow import model as chexnet

    def make_dataset(rank: int, workers: int) -> Any:
        if args.data == "synthetic":
            return pipeline.synthetic(batch_size=args.batch_size, image_size=args.image_size, rank=rank)
        return pipeline.build(
            args.pipeline,
            pipeline.shard_files(args.data, "train"),
            Reading(args.batch_size, args.image_size, rank=rank, workers=workers),
        )

    with dist.scope():
        model = chexnet.build(args.model, args.image_size)
        # Linear scaling rule: the global batch grows with the workers, so does the step size.
        optimizer = tf.keras.optimizers.Adam(args.learning_rate * dist.size)
        if args.mixed_precision:
            optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
        reduction = tf.keras.losses.Reduction.NONE if args.distribution == "mwms" else "auto"
        loss_fn = tf.keras.losses.BinaryCrossentropy(reduction=reduction)
    iterator = dist.dataset(make_dataset)
    step = dist.make_step(model, optimizer, loss_fn, args.mixed_precision)
    before = weights_digest(model.trainable_variables)

    # the first step traces the graph (and compiles it with XLA): never timed.
    # float() waits for the step to finish: the time is the real one. The optimizer's slots exist only after
    # the first step; then every worker continues from rank 0's state.
    timing = timed_steps(
        args, dist.rank, dist.size, lambda: float(step(iterator)), after_first=lambda: dist.broadcast(model, optimizer)
    )

    result: dict[str, Any] = {
        "rank": dist.rank,
        "size": dist.size,
        "local_rank": local_rank,
        "host": socket.gethostname(),
        "device": device,
        "distribution": args.distribution,
        "model": args.model,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "data": args.data,
        "pipeline": args.pipeline,
        "mixed_precision": args.mixed_precision,
        "precision": "fp16" if args.mixed_precision else "fp32",
        "xla": xla,
        "compile": args.compile,
        "compiled": xla,
        "weights_sha256_before": before,
        "weights_sha256": weights_digest(model.trainable_variables),
        **timing.record(),
    }
    if args.eval_batches and args.data != "synthetic" and dist.rank == 0:
        result["auroc"] = evaluate(model, args)
    return result


def evaluate(model: Any, args: argparse.Namespace) -> list[float | None]:
    import numpy as np

    from gpuready.workloads.tensorflow import data as pipeline

    ds = pipeline.new(pipeline.shard_files(args.data, "test"), evaluation(args))
    labels, scores = [], []
    for images, y in ds.take(args.eval_batches):
        labels.append(y.numpy())
        scores.append(model(images, training=False).numpy())
    return auroc(np.concatenate(labels), np.concatenate(scores))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    emit(run(args), args.out)


if __name__ == "__main__":
    main()
