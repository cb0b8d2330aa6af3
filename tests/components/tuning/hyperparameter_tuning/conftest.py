"""The team code of the training tests serves the tuning tests too."""

from tests.components.training.distributed_training.conftest import dataset, team_code  # noqa: F401
