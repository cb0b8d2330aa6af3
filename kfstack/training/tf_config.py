"""The ``TF_CONFIG`` the Kubeflow training-operator (v1.9) gives a TFJob's pods.

Facts (docs/architecture.md#training-operators-environment): ``TF_CONFIG = {"cluster": {"<type>":
["<job>-<type>-<i>.<ns>.svc:<port>", ...]}, "task": {"type": "<type>", "index": i}, "environment":
"cloud"}`` with lower-case replica types (``chief``, ``worker``, ``ps``, ``evaluator``), port
``tfjob-port`` (default 2222); it is set only when the job has more than one replica in total.

:func:`tfjob_tf_config` builds it (the local launcher passes loopback addresses);
:class:`TFTask` is what a trainer reads.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping

from kfstack.errors import InvalidParameterError

DEFAULT_TFJOB_PORT = 2222
CHIEF = "chief"
WORKER = "worker"
PS = "ps"
EVALUATOR = "evaluator"
REPLICA_TYPES = (CHIEF, WORKER, PS, EVALUATOR)


def tfjob_addresses(
    job_name: str, namespace: str, replicas: Mapping[str, int], port: int = DEFAULT_TFJOB_PORT
) -> dict[str, list[str]]:
    """The ``cluster`` part as the operator writes it for a job on a cluster."""
    return {
        rtype: [f"{job_name}-{rtype}-{i}.{namespace}.svc:{port}" for i in range(count)]
        for rtype, count in replicas.items()
        if count
    }


def tfjob_tf_config(cluster: Mapping[str, list[str]], task_type: str, index: int) -> str | None:
    """``TF_CONFIG`` of replica ``task_type`` ``index``; ``None`` for a one-replica job.

    Raises:
        InvalidParameterError: The replica is not in ``cluster``.
    """
    task_type = task_type.lower()
    if task_type not in cluster or not 0 <= index < len(cluster[task_type]):
        raise InvalidParameterError(f"{task_type} {index} is not a replica of {dict(cluster)}")
    if sum(len(addresses) for addresses in cluster.values()) == 1:
        return None
    return json.dumps(
        {
            "cluster": {k: list(v) for k, v in cluster.items()},
            "task": {"type": task_type, "index": index},
            "environment": "cloud",
        }
    )


@dataclasses.dataclass(frozen=True)
class TFTask:
    """This process's place in the TFJob (a lone process when there is no ``TF_CONFIG``)."""

    task_type: str = WORKER
    index: int = 0
    cluster: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def is_distributed(self) -> bool:
        return bool(self.cluster)

    @property
    def num_workers(self) -> int:
        return max(1, len(self.cluster.get(WORKER, [])))

    @property
    def has_parameter_servers(self) -> bool:
        return bool(self.cluster.get(PS))

    @property
    def is_chief(self) -> bool:
        """Writes checkpoints, exports and prints Katib lines: the chief, else worker 0."""
        if CHIEF in self.cluster:
            return self.task_type == CHIEF
        return self.task_type == WORKER and self.index == 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TFTask:
        """Parses ``TF_CONFIG`` (see the module docstring).

        Raises:
            InvalidParameterError: ``TF_CONFIG`` is not JSON, or names a task not in its cluster.
        """
        env = os.environ if env is None else env
        raw = env.get("TF_CONFIG")
        if not raw:
            return cls()
        try:
            config = json.loads(raw)
            cluster = {k.lower(): list(v) for k, v in config["cluster"].items()}
            task_type = config["task"]["type"].lower()
            index = int(config["task"]["index"])
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise InvalidParameterError(f"malformed TF_CONFIG: {err}") from err
        if task_type not in cluster or not 0 <= index < len(cluster[task_type]):
            raise InvalidParameterError(f"TF_CONFIG task {task_type} {index} is not in its cluster {cluster}")
        return cls(task_type=task_type, index=index, cluster=cluster)
