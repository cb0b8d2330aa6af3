"""The baseline of ``benchmarks.predictor_throughput``: a KServe model that answers 0.5 per
record without reading it, on the same ``ModelServer`` with the same flags as the predictor."""

from __future__ import annotations

import argparse

import kserve


class TrivialModel(kserve.Model):
    def load(self) -> bool:
        self.ready = True
        return self.ready

    def predict(self, payload, headers=None):
        return {"predictions": [0.5] * len(payload["instances"])}


def main() -> None:
    parser = argparse.ArgumentParser(parents=[kserve.model_server.parser])
    parser.add_argument("--model_dir", default="")
    args = parser.parse_args()
    model = TrivialModel(args.model_name)
    model.load()
    kserve.ModelServer(
        http_port=args.http_port,
        enable_grpc=args.enable_grpc,
        enable_latency_logging=args.enable_latency_logging,
    ).start([model])


if __name__ == "__main__":
    main()
