"""Each srun or mpirun task gets the Horovod slot horovodrun would have given it."""

from __future__ import annotations

import importlib.util

import pytest

from gpuready.workloads.launchers import rendezvous

needs_horovod = pytest.mark.skipif(importlib.util.find_spec("horovod") is None, reason="Horovod (train extra)")


def test_slurm_task_counts() -> None:
    assert rendezvous.task_counts("2(x3),1") == [2, 2, 2, 1]
    assert rendezvous.task_counts("4") == [4]
    with pytest.raises(ValueError, match="cannot read"):
        rendezvous.task_counts("2(x)")


@needs_horovod
@pytest.mark.parametrize(
    ("variables", "rank"),
    [
        ({"SLURM_PROCID": "3", "SLURM_LOCALID": "1"}, 3),
        ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, 2),
    ],
)
def test_worker_gets_its_slot_from_the_launcher_rank(variables: dict[str, str], rank: int) -> None:
    env = rendezvous.worker_env(
        {**variables, rendezvous.HOSTS: "node-a:2,node-b:2", rendezvous.ADDR: "127.0.0.1", rendezvous.PORT: "1234"}
    )
    assert env["HOROVOD_RANK"] == str(rank) and env["HOROVOD_SIZE"] == "4"
    assert env["HOROVOD_HOSTNAME"] == ("node-b" if rank >= 2 else "node-a")
    assert env["HOROVOD_LOCAL_RANK"] == str(rank % 2) and env["HOROVOD_CROSS_RANK"] == str(rank // 2)
    assert env["HOROVOD_CONTROLLER"] == "gloo" and env["HOROVOD_GLOO_IFACE"] == "lo"  # the route to 127.0.0.1


@needs_horovod
def test_worker_refuses_a_placement_horovod_would_not_make() -> None:
    with pytest.raises(ValueError, match="block placement"):
        rendezvous.worker_env(
            {
                "SLURM_PROCID": "1",
                "SLURM_LOCALID": "0",
                rendezvous.HOSTS: "node-a:2,node-b:2",
                rendezvous.ADDR: "127.0.0.1",
                rendezvous.PORT: "1",
            }
        )
    with pytest.raises(ValueError, match="no rank variable"):
        rendezvous.worker_env({rendezvous.HOSTS: "node-a:1", rendezvous.ADDR: "127.0.0.1", rendezvous.PORT: "1"})
