"""The embedded platform's rollout: KServe model servers on loopback and the local registry.

Production is the :class:`~kfstack.serving.registry.LocalRegistry`'s record. The servers are
services of the run (:mod:`kfstack.serving.local_services`): started here, stopped when the run
ends, whatever happens. A canary rollout serves the production model's registry copy as
``<model>-stable`` and the new model as ``<model>-canary``; the decision then stops the loser,
so that for the rest of the run the one left serves the model in production.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kfstack.errors import DeploymentFailedError, InvalidParameterError, RunFailedError
from kfstack.platforms import RUN_DIR_ENV
from kfstack.serving import local_services
from kfstack.serving.canary import Endpoint
from kfstack.serving.protocols import V1_PROBABILITIES, ServingProtocol
from kfstack.serving.registry import REGISTRY_DIR_ENV, LocalRegistry

MODE = "local"
STABLE = "stable"
CANARY = "canary"
# The model server's command line: (model directory, model name, port) -> argv.
ServerCommand = Callable[[str, str, int], list[str]]


class LocalRollout:
    """:class:`~kfstack.serving.rollout.Rollout` on this machine.

    Args:
        registry: Where production is recorded.
        run_dir: The run whose services the servers are.
        model_dir: The model directory to roll out.
        version: Its version (what the registry records).
        run_id: The run, for the registry's history.
        command: How a model server starts.
        ready_timeout_seconds: Longest wait for a server to load its model.
        protocol: How the analysis asks the servers for predictions.
    """

    mode = MODE

    def __init__(
        self,
        registry: LocalRegistry,
        run_dir: str,
        model_dir: str,
        version: str,
        run_id: str,
        command: ServerCommand,
        ready_timeout_seconds: float = 120.0,
        protocol: ServingProtocol = V1_PROBABILITIES,
    ) -> None:
        self.registry = registry
        self.run_dir = run_dir
        self.model_dir = model_dir
        self.version = version
        self.run_id = run_id
        self.command = command
        self.ready_timeout_seconds = ready_timeout_seconds
        self.protocol = protocol
        self._serving: dict[str, local_services.LocalService] = {}
        self._compared_with: str | None = None

    def _service_name(self, role: str) -> str:
        return f"{self.registry.model_name}-{role}"

    def _start(self, role: str, model_dir: str) -> Endpoint:
        name = self.registry.model_name
        try:
            service = local_services.start_service(
                self.run_dir,
                self._service_name(role),
                lambda port: self.command(model_dir, name, port),
                ready_path=f"/v2/models/{name}/ready",
                timeout_seconds=self.ready_timeout_seconds,
            )
        except RunFailedError as err:
            raise DeploymentFailedError(
                f"the {role} model server ({model_dir}) did not start: {err}"
            ) from err
        self._serving[role] = service
        return Endpoint(role, f"{service.url}{self.protocol.path(name)}", protocol=self.protocol)

    def _stop(self, role: str) -> None:
        local_services.stop_service(self.run_dir, self._service_name(role))
        self._serving.pop(role, None)

    def production_version(self) -> str | None:
        record = self.registry.production()
        # What this rollout compares against, and so the only production it may replace.
        self._compared_with = record.version if record else None
        return self._compared_with

    def deploy_first(self) -> Endpoint:
        return self._start(STABLE, self.model_dir)

    def deploy_canary(self) -> tuple[Endpoint, Endpoint]:
        record = self.registry.production()
        if record is None:
            raise DeploymentFailedError("no model in production to canary against")
        return self._start(STABLE, record.model_dir), self._start(CANARY, self.model_dir)

    def promote(self, details: Mapping[str, Any]) -> None:
        self.registry.promote(
            self.model_dir, self.version, self.run_id, dict(details), replacing=self._compared_with
        )
        if CANARY in self._serving:
            self._stop(STABLE)

    def roll_back(self, details: Mapping[str, Any], settle: bool = True) -> None:
        self._stop(CANARY)
        self.registry.record_rollback(self.version, self.run_id, dict(details))

    def reference(self) -> dict[str, Any]:
        return {
            "kind": "LocalModelServers",
            "registry": self.registry.path,
            "servers": {role: service.url for role, service in self._serving.items()},
        }


def embedded_rollout(
    *,
    run_dir: str,
    registry_dir: str,
    name: str,
    model_dir: str,
    version: str,
    run_id: str,
    command: ServerCommand,
    protocol: ServingProtocol = V1_PROBABILITIES,
) -> LocalRollout:
    """A deployment step's rollout on this machine: the run's servers, the registry of ``name``.

    Raises:
        InvalidParameterError: The step does not run inside ``kfstack run --local`` (which sets
            the run's and the registry's directories); nothing was started.
    """
    if not (run_dir and registry_dir):
        raise InvalidParameterError(
            f"deploy on the embedded platform needs {RUN_DIR_ENV} and {REGISTRY_DIR_ENV} (set by "
            f"`kfstack run --local`); run it through that, or deploy=false"
        )
    return LocalRollout(
        LocalRegistry(registry_dir, name), run_dir, model_dir, version, run_id, command, protocol=protocol
    )
