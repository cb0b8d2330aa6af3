"""The environment the training operators give a PyTorch trainer's pods, and how it is read.

**training-operator v1.9 (PyTorchJob)** (docs/architecture.md#training-operators-environment): with
a Master replica the operator sets ``MASTER_ADDR`` (``<job>-master-0``), ``MASTER_PORT`` (the
``pytorchjob-port``, default 23456), ``WORLD_SIZE`` (replicas × nprocPerNode), ``RANK`` (Master 0,
Worker i -> i + 1; a *node* rank) and the ``PET_*`` twins torchrun reads. :func:`pytorchjob_env`
builds exactly that env.

**Kubeflow Trainer v2 (TrainJob on the torch runtime)**: only the ``PET_*`` variables -- the
torchrun contract (``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``,
``PET_MASTER_ADDR``, ``PET_MASTER_PORT``), no ``WORLD_SIZE`` and no ``RANK``. The pod's command
must therefore be ``torchrun``, which derives the global ``RANK``/``WORLD_SIZE`` from them.
:func:`trainjob_env` builds that env.

The local launcher starts its processes with these same builders (loopback addresses);
:func:`DistributedEnv.from_env` is what a trainer reads, on a cluster or locally. Without
``WORLD_SIZE`` the trainer runs as a single process -- unless the ``PET_*`` variables say it is
one node of several, which it refuses (see there).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from kfstack.errors import InvalidParameterError

DEFAULT_PYTORCHJOB_PORT = 23456
# The port the Trainer v2.3 torch plugin puts in PET_MASTER_PORT (and opens on the container).
DEFAULT_TRAINJOB_PORT = 29500
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


def trainjob_env(
    master_addr: str, node_rank: int, num_nodes: int, port: int = DEFAULT_TRAINJOB_PORT
) -> dict[str, str]:
    """The env of node ``node_rank`` of a TrainJob on the torch runtime (one process per node).

    Args:
        master_addr: What ``PET_MASTER_ADDR`` resolves to (node 0's pod on a cluster).
        node_rank: The node's index (the pod's job-completion index on a cluster).
        num_nodes: ``spec.trainer.numNodes``.
        port: ``PET_MASTER_PORT``.

    Returns:
        Exactly the ``PET_*`` variables the runtime sets; torchrun turns them into ``RANK``,
        ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` for its process.

    Raises:
        InvalidParameterError: The node does not exist in such a job.
    """
    if not 0 <= node_rank < num_nodes:
        raise InvalidParameterError(f"node {node_rank} does not fit {num_nodes} nodes")
    return {
        "PET_NNODES": str(num_nodes),
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": str(node_rank),
        "PET_MASTER_ADDR": master_addr,
        "PET_MASTER_PORT": str(port),
    }


def _pet_int(env: Mapping[str, str], name: str) -> int:
    """A ``PET_*`` count; an elastic job's ``PET_NNODES`` reads ``min:max`` (the upper bound)."""
    try:
        return int(env.get(name, "1").rpartition(":")[2])
    except ValueError as err:
        raise InvalidParameterError(f"malformed distributed env: {name}={env.get(name)!r}") from err


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

        A process that sees ``PET_NNODES`` > 1 (or ``PET_NPROC_PER_NODE`` > 1) but no
        ``WORLD_SIZE`` was started without torchrun on one node of a multi-node job (a TrainJob
        whose command is not torchrun): alone it would train the whole job by itself, N times
        over, every copy writing the same checkpoint and model URIs. It is refused.

        Raises:
            InvalidParameterError: The variables are inconsistent (e.g. RANK >= WORLD_SIZE) or
                describe several processes per pod, or several nodes, without torchrun.
        """
        env = os.environ if env is None else env
        if "WORLD_SIZE" not in env:
            nodes, per_node = _pet_int(env, "PET_NNODES"), _pet_int(env, "PET_NPROC_PER_NODE")
            if nodes * per_node > 1:
                raise InvalidParameterError(
                    f"PET_NNODES={nodes}, PET_NPROC_PER_NODE={per_node} but no WORLD_SIZE: this "
                    f"process is one of {nodes * per_node} and does not know its rank. Start the "
                    f"trainer through torchrun (`torchrun -m <trainer module> ...`), which sets "
                    f"RANK and WORLD_SIZE from the PET_* variables"
                )
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
