"""A team's training module run as ``python -m`` with ``--name=value`` arguments, no framework:
what the wrapper needs of any code. ``--mode`` makes it break one contract on purpose."""

import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--depth", type=int, required=True)
parser.add_argument("--mode", default="good")
args = parser.parse_args()

print(f"depth={args.depth} score={0.5 + args.depth / 100}")
if args.mode == "crash":
    raise SystemExit(3)
if args.mode != "no-model":
    with open(os.path.join(os.environ["KFSTACK_MODEL_DIR"], "model.joblib"), "wb") as f:
        f.write(b"weights")
if args.mode == "bad-report":
    with open(os.environ["KFSTACK_REPORT_PATH"], "w") as f:
        f.write('{"rows": "many"}')
