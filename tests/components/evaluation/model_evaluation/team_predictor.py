"""A team's own predictor, as a team writes one for KServe: a ``kserve.Model`` built with the
model's name and directory, taking records (``{"instances": [{"x": ...}, ...]}``) and refusing a
malformed one with KServe's InvalidInput. Its model is a JSON file of a line's slope and
intercept."""

import json
import os

import kserve
from kserve.errors import InvalidInput


class LinePredictor(kserve.Model):
    def __init__(self, name: str, model_dir: str) -> None:
        super().__init__(name)
        self.model_dir = model_dir

    def load(self) -> bool:
        with open(os.path.join(self.model_dir, "line.json")) as f:
            self.line = json.load(f)
        self.ready = True
        return True

    def predict(self, payload, headers=None):
        try:
            xs = [float(record["x"]) for record in payload["instances"]]
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidInput(f"instances: each record needs a number x ({err})") from None
        return {"predictions": [self.line["slope"] * x + self.line["intercept"] for x in xs]}
