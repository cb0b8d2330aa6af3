"""Fixtures shared by the tests of more than one component."""

from __future__ import annotations

import pytest

from kfstack.serving.registry import REGISTRY_DIR_ENV, LocalRegistry


@pytest.fixture
def flights_registry(tmp_path, monkeypatch) -> LocalRegistry:
    """The embedded platform's registry of the flights model, its folder in the environment as
    ``kfstack run --local`` sets it (tests/components/flights_retraining.py)."""
    from tests.components.flights_retraining import NAME

    monkeypatch.setenv(REGISTRY_DIR_ENV, str(tmp_path / "registry"))
    return LocalRegistry(str(tmp_path / "registry"), NAME)
