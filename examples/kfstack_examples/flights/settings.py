"""The flights pipelines' own settings: how much of the holdout a canary replays.

(The rules across their stages are the pipelines' own:
:func:`kfstack_examples.flights.pipelines.steps.check_run`.)
"""

from __future__ import annotations

import dataclasses

from kfstack.api import Settings, setting
from kfstack_examples.flights.scoring import DEFAULT_MAX_BATCH


@dataclasses.dataclass(frozen=True)
class CanaryReplay(Settings):
    """How much of the feature job's labelled holdout a canary analysis replays, and in what
    batches (each batch is one request to each side)."""

    concern = "canary analysis"

    records: int = setting(2000, ge=1)
    batch_size: int = setting(20, ge=1, le=DEFAULT_MAX_BATCH)


# The pipelines' parameter names of the fields.
REPLAY_PARAMETERS = {"records": "canary_records", "batch_size": "canary_batch_size"}
