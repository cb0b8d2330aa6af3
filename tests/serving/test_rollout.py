"""The embedded platform's rollout with real model servers on loopback and a real registry:
first deployment, an unchanged one, a promoted canary, rolled-back canaries (a constant one,
one that cannot start, one cut short by SIGTERM), and what each leaves serving."""

from __future__ import annotations

import os
import signal

import pytest

from kfstack.errors import CancelledError, DeploymentFailedError
from kfstack.serving import local_services
from kfstack.serving.canary import PROMOTE, ROLLBACK, CanaryThresholds, Endpoint, probe
from kfstack.serving.local_rollout import LocalRollout
from kfstack.serving.registry import LocalRegistry
from kfstack.serving.rollout import FIRST, UNCHANGED, roll_out
from kfstack_examples.flights.predictor import command
from tests.serving.conftest import read_holdout

MODEL = "flights-delay"
FAULTY_MODULE = "tests.serving.faulty_predictor"


def server_command(fault: str | None = None, faulty_dir: str | None = None):
    """The predictor's command line; with ``fault``, the faulty predictor for the model in
    ``faulty_dir`` (the canary's: the stable one serves the registry's copy of production)."""

    def argv(model_dir: str, name: str, port: int) -> list[str]:
        extra = ["--enable_latency_logging=false"]
        if fault and model_dir == faulty_dir:
            return command(model_dir, name, port, *extra, f"--fault={fault}", module=FAULTY_MODULE)
        return command(model_dir, name, port, *extra)

    return argv


@pytest.fixture(scope="module")
def holdout(trained):
    return read_holdout(trained["features"], 400)


@pytest.fixture
def registry(tmp_path):
    return LocalRegistry(str(tmp_path / "registry"), MODEL)


class Runs:
    """One run directory per rollout, as the embedded runner makes them; every server they
    started is stopped at the end, as the runner stops them."""

    def __init__(self, root) -> None:
        self.root, self.dirs = root, []

    def rollout(self, registry, model_dir, version, fault=None) -> LocalRollout:
        run_dir = str(self.root / version)
        self.dirs.append(run_dir)
        return LocalRollout(
            registry, run_dir, model_dir, version, version, server_command(fault, model_dir), 60
        )

    def stop_all(self) -> None:
        for run_dir in self.dirs:
            local_services.stop_services(run_dir)


@pytest.fixture
def runs(tmp_path):
    runs = Runs(tmp_path / "runs")
    yield runs
    runs.stop_all()


def served(rollout: LocalRollout) -> set[str]:
    return {
        role
        for role in ("stable", "canary")
        if local_services.find_service(rollout.run_dir, f"{MODEL}-{role}")
    }


def deploy(rollout: LocalRollout, holdout):
    return roll_out(rollout, rollout.version, holdout, CanaryThresholds(), batch_size=20)


def test_the_holdout_is_labelled_requests(holdout):
    assert len(holdout.records) == len(holdout.labels) == 400
    assert set(holdout.labels) == {0, 1}
    assert "label" not in holdout.records[0] and "dep_delay" not in holdout.records[0]


def test_first_rollout_goes_to_production_then_a_good_canary_is_promoted(trained, holdout, registry, runs):
    first = runs.rollout(registry, trained["model"], "run-1")
    outcome = deploy(first, holdout)
    assert (outcome.decision, outcome.production_version, outcome.previous_version) == (FIRST, "run-1", None)
    assert registry.production().version == "run-1"
    assert served(first) == {"stable"}
    assert outcome.metrics()["decision_first"] == 1.0 and "psi" not in outcome.metrics()
    # The same version again (a resumed run) changes nothing.
    assert deploy(runs.rollout(registry, trained["model"], "run-1"), holdout).decision == UNCHANGED

    second = runs.rollout(registry, trained["model"], "run-2")
    outcome = deploy(second, holdout)
    assert outcome.decision == PROMOTE, outcome.markdown()
    assert (outcome.production_version, outcome.previous_version) == ("run-2", "run-1")
    assert registry.production().version == "run-2"
    # The promoted canary serves on; the old stable server is gone.
    assert served(second) == {"canary"}
    (promoted,) = [e for e in registry.history() if e["event"] == "promoted"]
    assert promoted["figures"]["canary_requests"] == 20 and promoted["failed_checks"] == []
    summary = outcome.summary()
    assert summary["mode"] == "local" and summary["figures"]["stable_error_rate"] == 0.0
    assert "Canary run-2 promoted" in outcome.markdown()


@pytest.mark.slow
def test_a_constant_canary_is_rolled_back_and_production_is_untouched(trained, holdout, registry, runs):
    deploy(runs.rollout(registry, trained["model"], "run-1"), holdout)
    canary = runs.rollout(registry, trained["model"], "run-2", fault="constant")
    outcome = deploy(canary, holdout)
    assert outcome.decision == ROLLBACK
    assert outcome.production_version == "run-1" and registry.production().version == "run-1"
    assert set(outcome.summary()["failed_checks"]) == {"prediction shift", "AUC"}
    assert served(canary) == {"stable"}  # the canary is stopped; the stable model serves on
    stable = local_services.find_service(canary.run_dir, f"{MODEL}-stable")
    probe(Endpoint("stable", f"{stable.url}/v1/models/{MODEL}:predict"), holdout.records[:5])
    assert [e["event"] for e in registry.history()] == ["first", "rolled_back"]


@pytest.mark.slow
def test_a_canary_that_cannot_start_fails_the_step_and_is_rolled_back(
    trained, holdout, registry, runs, tmp_path
):
    deploy(runs.rollout(registry, trained["model"], "run-1"), holdout)
    broken = tmp_path / "not-a-model"
    broken.mkdir()
    canary = runs.rollout(registry, str(broken), "run-2")
    with pytest.raises(DeploymentFailedError, match="canary model server"):
        deploy(canary, holdout)
    assert registry.production().version == "run-1"
    rolled_back = registry.history()[-1]
    assert rolled_back["event"] == "rolled_back" and "did not start" in rolled_back["reason"]
    assert served(canary) == {"stable"}


class CancelledMidRollout(LocalRollout):
    """SIGTERM (a cancelled run) arrives the moment both servers are up."""

    def deploy_canary(self):
        endpoints = super().deploy_canary()
        os.kill(os.getpid(), signal.SIGTERM)
        return endpoints


@pytest.mark.slow
def test_sigterm_mid_rollout_rolls_the_canary_back(trained, holdout, registry, runs):
    deploy(runs.rollout(registry, trained["model"], "run-1"), holdout)
    run_dir = str(runs.root / "run-2")
    runs.dirs.append(run_dir)
    canary = CancelledMidRollout(registry, run_dir, trained["model"], "run-2", "run-2", server_command(), 60)
    with pytest.raises(CancelledError):
        deploy(canary, holdout)
    assert registry.production().version == "run-1"
    assert "CancelledError" in registry.history()[-1]["reason"]
    assert served(canary) == {"stable"}
