"""The environment the Kubeflow training-operator (v1.9) gives a PyTorchJob's pods.

Facts (DESIGN §3): with a Master replica the operator sets ``MASTER_ADDR`` (``<job>-master-0``),
``MASTER_PORT`` (the ``pytorchjob-port``, default 23456), ``WORLD_SIZE`` (replicas ×
nprocPerNode), ``RANK`` (Master 0, Worker i -> i + 1; a *node* rank) and the ``PET_*`` twins
torchrun reads. Without ``WORLD_SIZE`` the trainer runs as a single process.

:func:`pytorchjob_env` builds exactly that env (the local launcher uses it with a loopback
address); :func:`DistributedEnv.from_env` is what a trainer reads, on a cluster or locally.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from kfstack.errors import InvalidParameterError

DEFAULT_PYTORCHJOB_PORT = 23456
MASTER = "master"
WORKER = "worker"


def pytorchjob_env(
    master_addr: str,
    replica_type: str,
    index: int,
    num_replicas: int,
    port: int = DEFAULT_PYTORCHJOB_PORT,
) -> dict[str, str]:
    """The env of one pod of a PyTorchJob with one Master and ``num_replicas - 1`` Workers.

    Args:
        master_addr: What ``MASTER_ADDR`` resolves to (``<job>-master-0`` on a cluster).
        replica_type: ``master`` or ``worker`` (any case: the CRD spells them ``Master``,
            ``Worker``).
        index: The replica index within its type (Worker i has node rank i + 1).
        num_replicas: Master + Workers, one process per pod (nprocPerNode 1).
        port: The master's ``pytorchjob-port``.

    Returns:
        Variable name -> value, all strings, exactly the operator's set (no more, no less).

    Raises:
        InvalidParameterError: The replica does not exist in such a job.
    """
    replica_type = replica_type.lower()
    if replica_type == MASTER:
        if index != 0:
            raise InvalidParameterError("a PyTorchJob has exactly one Master (index 0)")
        rank = 0
    elif replica_type == WORKER:
        rank = index + 1
    else:
        raise InvalidParameterError(f"replica_type={replica_type!r}: expected master or worker")
    if not 0 <= rank < num_replicas:
        raise InvalidParameterError(f"{replica_type} {index} does not fit {num_replicas} replicas")
    return {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(num_replicas),
        "RANK": str(rank),
        "PET_MASTER_ADDR": master_addr,
        "PET_MASTER_PORT": str(port),
        "PET_NNODES": str(num_replicas),
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": str(rank),
    }


@dataclasses.dataclass(frozen=True)
class DistributedEnv:
    """Where this process sits in the job. ``world_size == 1``: train alone, no process group."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = DEFAULT_PYTORCHJOB_PORT

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_chief(self) -> bool:
        """Rank 0 writes checkpoints, exports the model and prints the Katib metric lines."""
        return self.rank == 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DistributedEnv:
        """Parses the operator's env (see the module docstring).

        One process per pod (``nprocPerNode: 1``) is the supported layout. With
        ``PET_NPROC_PER_NODE`` > 1 the operator's ``RANK`` is a *node* rank and ``WORLD_SIZE``
        counts processes, so a pod must start its processes through ``torchrun``, which
        replaces ``RANK`` with the global rank and sets ``LOCAL_RANK`` and ``TORCHELASTIC_RUN_ID``;
        a process that sees the operator's values directly is refused.

        Args:
            env: The variables to read; default ``os.environ``.

        Returns:
            Rank 0 of 1 without ``WORLD_SIZE``, else what the variables say.

        Raises:
            InvalidParameterError: The variables are inconsistent (e.g. RANK >= WORLD_SIZE) or
                describe several processes per pod without torchrun.
        """
        env = os.environ if env is None else env
        if "WORLD_SIZE" not in env:
            return cls()
        try:
            world_size = int(env["WORLD_SIZE"])
            rank = int(env.get("RANK", "0"))
            local_rank = int(env.get("LOCAL_RANK", "0"))
            port = int(env.get("MASTER_PORT", DEFAULT_PYTORCHJOB_PORT))
            nproc_per_node = int(env.get("PET_NPROC_PER_NODE", "1"))
        except ValueError as err:
            raise InvalidParameterError(f"malformed distributed env: {err}") from err
        if nproc_per_node > 1 and "TORCHELASTIC_RUN_ID" not in env:
            raise InvalidParameterError(
                f"PET_NPROC_PER_NODE={nproc_per_node}: RANK={rank} is a node rank, not a process "
                f"rank. Start the trainer through torchrun (which sets the global RANK) or use "
                f"nprocPerNode: 1 with one replica per process"
            )
        if world_size < 1 or not 0 <= rank < world_size:
            raise InvalidParameterError(f"RANK={rank} is not in [0, WORLD_SIZE={world_size})")
        if world_size > 1 and "MASTER_ADDR" not in env:
            raise InvalidParameterError("WORLD_SIZE > 1 but MASTER_ADDR is not set")
        return cls(
            rank=rank,
            world_size=world_size,
            local_rank=local_rank,
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=port,
        )
