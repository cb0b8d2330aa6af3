"""The production model as the flights retraining pipeline's generic steps see it, on one small
real flights run (``trained``, tests/conftest.py): shared by the production_model, data_drift
and gate_model tests that run on real model directories (the ``flights_registry`` fixture is in
tests/components/conftest.py)."""

from __future__ import annotations

import os
import shutil

from kfstack.components.serving.production_model import core as production_core
from kfstack.serving.production import FoundModel
from kfstack.serving.registry import LocalRegistry
from kfstack_examples.flights.feature_spec import PROFILE_FILE
from kfstack_examples.flights.scoring import MODEL_DIR_FILES

NAME = "flights-delay"
# What the flights pipelines compare a production model by: what its predictor loads, and the
# profile of its training data.
COMPARABLE = (*MODEL_DIR_FILES, PROFILE_FILE)


def fetch_production_model(platform: str, name: str, target: str) -> FoundModel:
    """The generic production-model step as the flights pipelines run it."""
    return production_core.fetch_production_model(platform, name, target, COMPARABLE)


def promote_another_kind(registry: LocalRegistry, model_dir: str, root) -> tuple[str, FoundModel]:
    """A model in production that the run cannot compare with (it lacks the profile of its
    training data), fetched as the production-model step does: its directory and what was found."""
    other = root / "other"
    shutil.copytree(model_dir, other)
    os.remove(other / PROFILE_FILE)
    registry.promote(str(other), "handmade", "run-0")
    champion = str(root / "champion")
    return champion, fetch_production_model("local", NAME, champion)
