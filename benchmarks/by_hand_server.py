"""The by-hand baseline of ``benchmarks.model_server_overhead``: the same ``kserve.Model`` (the
flights predictor's, or the onnx stand-in's) loading the same files, checking its input the same
way and answering with the same library, on KServe's bare ``ModelServer``: none of kfstack's
server (no request middleware, no body limit or deadline, no live drift, no address binding).

    python -m benchmarks.by_hand_server --kind flights|onnx --model_name NAME --model_dir DIR --http_port P
"""

from __future__ import annotations

import argparse

import kserve


def main() -> None:
    parser = argparse.ArgumentParser(parents=[kserve.model_server.parser])
    parser.add_argument("--kind", required=True, choices=("flights", "onnx"))
    parser.add_argument("--model_dir", required=True)
    args = parser.parse_args()
    model: kserve.Model
    if args.kind == "flights":
        from kfstack_examples.flights.predictor.server import FlightDelayModel

        model = FlightDelayModel(args.model_name, args.model_dir)
    else:
        from kfstack.serving.standard_formats import TritonOnnxModel

        model = TritonOnnxModel(args.model_name, args.model_dir)
    model.load()
    kserve.ModelServer(
        http_port=args.http_port,
        enable_grpc=False,
        enable_latency_logging=args.enable_latency_logging,
    ).start([model])


if __name__ == "__main__":
    main()
