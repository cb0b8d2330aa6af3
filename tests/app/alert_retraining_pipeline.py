"""A team's retraining pipeline as small as one gets, for the alert receiver's embedded runs:
it takes the model's name, ``force`` and the ``trigger`` a drift alert writes (no ``from
__future__ import annotations`` here: kfp reads the annotations as types)."""

from kfp import dsl


@dsl.component(base_image="python:3.11")
def retrain(serving_name: str, trigger: str, force: bool) -> str:
    return f"{serving_name} retrained (force={force}): {trigger}"


@dsl.pipeline(name="team-retraining")
def team_retraining(
    serving_name: str = "model", trigger: str = "", force: bool = False, platform: str = "kubernetes"
):
    retrain(serving_name=serving_name, trigger=trigger, force=force)
