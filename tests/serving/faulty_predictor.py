"""The predictor with an injected fault, for the canary analysis tests.

    python -m tests.serving.faulty_predictor --fault {errors,constant,slow} <predictor flags>

- ``errors``: every 5th request fails with a 500 (20% of the traffic);
- ``constant``: answers 0.5 for every record (a model that learned nothing);
- ``slow``: sleeps 30 ms per request, about ten times a healthy request's 2-4 ms on loopback here.
"""

from __future__ import annotations

import argparse
import sys
import time

from kfstack_examples.flights.predictor import server

FAULT = ""  # set from --fault when run as a script


class FaultyModel(server.FlightDelayModel):
    calls = 0

    def predict(self, payload, headers=None):
        FaultyModel.calls += 1
        if FAULT == "errors" and FaultyModel.calls % 5 == 0:
            raise RuntimeError("injected fault")
        if FAULT == "slow":
            time.sleep(0.03)
        result = super().predict(payload, headers)
        if FAULT == "constant":
            return {"predictions": [0.5] * len(result["predictions"])}
        return result


if __name__ == "__main__":
    fault_parser = argparse.ArgumentParser()
    fault_parser.add_argument("--fault", choices=["errors", "constant", "slow"], required=True)
    fault, rest = fault_parser.parse_known_args()
    FAULT = fault.fault
    sys.exit(server.main(rest, model_class=FaultyModel))
