"""Node-pool profiles: which nodes a pod lands on and what it requests there.

A profile (see ``node_pools.yaml`` beside this module for the fields and the shipped pools)
turns into four things:

- pod settings for the jobs kfstack launches (:meth:`NodePoolProfile.pod_settings`): node
  selector, tolerations, resources, ``priorityClassName``;
- job settings: the Kueue queue label (jobs are then created suspended and Kueue admits them)
  and, on spot pools, ``restartPolicy: ExitCode``;
- KFP task settings through kfp-kubernetes (:func:`apply_to_task`), for task pods that must run
  on a pool themselves;
- a price (:meth:`NodePoolProfile.price_per_hour`), when the profile states one, from which a
  training run reports its cost per epoch.

``KFSTACK_NODE_POOLS`` names a replacement profile file; the launcher image reads it at run time,
so a platform team changes pools without recompiling pipelines.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from typing import Any

import yaml

from kfstack.errors import InvalidParameterError

PROFILES_FILE = os.path.join(os.path.dirname(__file__), "node_pools.yaml")
PROFILES_ENV = "KFSTACK_NODE_POOLS"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The pool of CPU work (Spark, launcher and evaluation task pods); must exist in every profile file.
CPU_POOL = "cpu"
# The default pool of model servers (InferenceService predictors).
SERVING_POOL = "serving"
TOLERATION_FIELDS = {"key", "operator", "value", "effect", "tolerationSeconds"}


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """An extended resource each pod requests and limits (``nvidia.com/gpu``, a MIG slice...)."""

    resource: str
    count: int


@dataclasses.dataclass(frozen=True)
class NodePoolProfile:
    """One node pool, as the profile file describes it (field meanings: ``node_pools.yaml``)."""

    name: str
    description: str
    node_selector: dict[str, str]
    tolerations: tuple[dict[str, Any], ...]
    accelerator: Accelerator | None
    cpu: str
    memory: str
    priority_class: str | None
    queue: str | None
    spot: bool
    price_per_node_hour: float | None = None
    gpus_per_node: int | None = None

    @property
    def gpu(self) -> bool:
        return self.accelerator is not None

    def price_per_hour(self, pods: int) -> float | None:
        """What ``pods`` pods of one job on this pool cost per hour; None when it has no price.

        Each pod pays its share of a node: ``accelerator.count / gpus_per_node`` of the node's
        price on a pool with an accelerator (the node's other GPUs are assumed to serve other
        work), a whole node on a pool without one (its price is that of the node one pod fills).
        """
        if self.price_per_node_hour is None:
            return None
        if self.accelerator is None:
            return pods * self.price_per_node_hour
        if self.gpus_per_node is None:
            return None  # no share to pay (load_profiles refuses a price without it)
        return pods * self.price_per_node_hour * self.accelerator.count / self.gpus_per_node

    def resources(self) -> dict[str, dict[str, str]]:
        """Container ``resources``: CPU and memory requested; memory and accelerator limited.

        No CPU limit: CFS throttling of a data loader or an all-reduce thread costs more than
        it protects, and the request already reserves the cores.
        """
        requests = {"cpu": self.cpu, "memory": self.memory}
        limits = {"memory": self.memory}
        if self.accelerator is not None:
            requests[self.accelerator.resource] = str(self.accelerator.count)
            limits[self.accelerator.resource] = str(self.accelerator.count)
        return {"requests": requests, "limits": limits}

    def pod_settings(self) -> dict[str, Any]:
        """The PodSpec fields this profile sets (camelCase, ready for a manifest)."""
        settings: dict[str, Any] = {
            "nodeSelector": dict(self.node_selector),
            "tolerations": [dict(t) for t in self.tolerations],
        }
        if self.priority_class:
            settings["priorityClassName"] = self.priority_class
        return settings

    def job_labels(self) -> dict[str, str]:
        """Labels of the launched job object (Kueue reads its queue from the job's labels)."""
        return {KUEUE_QUEUE_LABEL: self.queue} if self.queue else {}

    @property
    def suspend_on_create(self) -> bool:
        """Kueue admits suspended jobs; a job outside any queue starts at once."""
        return self.queue is not None


def _toleration(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    unknown = set(raw) - TOLERATION_FIELDS
    if unknown:
        raise InvalidParameterError(f"{where}: unknown toleration fields {sorted(unknown)}")
    return dict(raw)


def _profile(name: str, raw: Mapping[str, Any], spot_tolerations: list[dict[str, Any]]) -> NodePoolProfile:
    where = f"node-pool profile {name!r}"
    required = {"node_selector", "cpu", "memory"}
    missing = required - set(raw)
    if missing:
        raise InvalidParameterError(f"{where}: missing {sorted(missing)}")
    accelerator = None
    if raw.get("accelerator"):
        acc = raw["accelerator"]
        try:
            accelerator = Accelerator(resource=str(acc["resource"]), count=int(acc["count"]))
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidParameterError(f"{where}: accelerator needs resource and count ({err})") from err
        if accelerator.count < 1:
            raise InvalidParameterError(f"{where}: accelerator count must be >= 1")
    price, gpus_per_node = _price(raw, accelerator, where)
    spot = bool(raw.get("spot", False))
    tolerations = [_toleration(t, where) for t in raw.get("tolerations") or []]
    if spot:
        tolerations += [t for t in spot_tolerations if t not in tolerations]
    return NodePoolProfile(
        name=name,
        description=str(raw.get("description", "")),
        node_selector={str(k): str(v) for k, v in (raw["node_selector"] or {}).items()},
        tolerations=tuple(tolerations),
        accelerator=accelerator,
        cpu=str(raw["cpu"]),
        memory=str(raw["memory"]),
        priority_class=raw.get("priority_class") or None,
        queue=raw.get("queue") or None,
        spot=spot,
        price_per_node_hour=price,
        gpus_per_node=gpus_per_node,
    )


def _price(
    raw: Mapping[str, Any], accelerator: Accelerator | None, where: str
) -> tuple[float | None, int | None]:
    """``price_per_node_hour`` and ``gpus_per_node``, checked so that a price can be split per pod."""
    price = raw.get("price_per_node_hour")
    gpus = raw.get("gpus_per_node")
    # bool is an int to Python, but `price_per_node_hour: yes` is a typo, not a price.
    if price is not None and (isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0):
        raise InvalidParameterError(f"{where}: price_per_node_hour={price!r} must be a number >= 0 or null")
    if gpus is not None:
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise InvalidParameterError(f"{where}: gpus_per_node={gpus!r} must be a whole number >= 1")
        if accelerator is None:
            raise InvalidParameterError(
                f"{where}: gpus_per_node={gpus} without an accelerator; remove it or add the accelerator"
            )
        if gpus < accelerator.count:
            raise InvalidParameterError(
                f"{where}: gpus_per_node={gpus} is less than the accelerator count of one pod "
                f"({accelerator.count})"
            )
    if price is not None and accelerator is not None and gpus is None:
        raise InvalidParameterError(
            f"{where}: price_per_node_hour needs gpus_per_node on a pool with an accelerator "
            f"(each pod pays {accelerator.resource} count / gpus_per_node of the node)"
        )
    return (None if price is None else float(price)), gpus


def profiles_path() -> str:
    """The profile file in use: ``$KFSTACK_NODE_POOLS``, else the shipped one."""
    return os.environ.get(PROFILES_ENV) or PROFILES_FILE


def load_profiles(path: str | None = None) -> dict[str, NodePoolProfile]:
    """Reads a profile file: ``path``, else ``$KFSTACK_NODE_POOLS``, else the shipped one.

    Raises:
        InvalidParameterError: The file is malformed (names the profile and field).
    """
    path = path or profiles_path()
    state = os.stat(path)
    return dict(_parsed_profiles(path, state.st_mtime_ns, state.st_size))


@functools.lru_cache(maxsize=8)
def _parsed_profiles(path: str, mtime_ns: int, size: int) -> dict[str, NodePoolProfile]:
    """:func:`load_profiles`' parse, once per version of the file: a pipeline's definition and
    its check ask for the profiles once per step (25 YAML parses a run check, 0.3 s)."""
    with open(path, encoding="utf-8") as f:
        document = yaml.safe_load(f) or {}
    profiles = document.get("profiles")
    if not isinstance(profiles, dict) or not profiles:
        raise InvalidParameterError(f"{path}: expected a non-empty 'profiles' mapping")
    spot_tolerations = [
        _toleration(t, f"{path} spot_tolerations") for t in document.get("spot_tolerations") or []
    ]
    return {name: _profile(name, raw, spot_tolerations) for name, raw in profiles.items()}


def get_profile(name: str, path: str | None = None) -> NodePoolProfile:
    """The profile called ``name``.

    Raises:
        InvalidParameterError: No such profile (the message lists the known ones).
    """
    profiles = load_profiles(path)
    try:
        return profiles[name]
    except KeyError:
        raise InvalidParameterError(
            f"unknown node pool {name!r}; the profile file defines: {', '.join(sorted(profiles))}"
        ) from None


def apply_to_task(task: Any, profile: NodePoolProfile) -> Any:
    """Puts a KFP task's pod on ``profile``'s pool (compile time, through kfp-kubernetes).

    Node selector, tolerations, CPU/memory requests and the accelerator. ``kfp.local`` ignores
    all of it; on a cluster the task's pod gets it.
    """
    from kfp import kubernetes  # deferred: only pipeline modules need kfp

    if profile.node_selector:
        kubernetes.add_node_selector_json(task, dict(profile.node_selector))
    for toleration in profile.tolerations:
        kubernetes.add_toleration(
            task,
            key=toleration.get("key"),
            operator=toleration.get("operator"),
            value=toleration.get("value"),
            effect=toleration.get("effect"),
            toleration_seconds=toleration.get("tolerationSeconds"),
        )
    task.set_cpu_request(profile.cpu).set_memory_request(profile.memory).set_memory_limit(profile.memory)
    if profile.accelerator is not None:
        task.set_accelerator_type(profile.accelerator.resource)
        task.set_accelerator_limit(profile.accelerator.count)
    return task
