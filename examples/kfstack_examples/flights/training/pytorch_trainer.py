"""The PyTorch trainer: what each TrainJob node or PyTorchJob pod (or local replica) runs.

    python -m kfstack_examples.flights.training.pytorch_trainer \\
        --features-uri F --model-uri M --checkpoint-uri C [--epochs 4] [--batch-size 1024] \\
        [--learning-rate 0.003] [--seed 42]

- Reads the PyTorchJob env, or torchrun's from a TrainJob node's ``PET_*``
  (:mod:`kfstack.training.env_contract`); without ``WORLD_SIZE`` (and not one of several) it
  trains alone. Distributed: DDP over gloo on CPU, NCCL on GPU.
- Each rank reads only its own train and validation shards (round robin, disjoint).
- ``--batch-size`` is the *global* batch: each rank takes ``batch_size // world_size``, and every
  rank runs the same number of steps per epoch (the smallest rank's), or DDP would hang.
- bf16 autocast on GPU; fp32 on CPU.
- After each epoch: validation over the whole validation split (ranks score their shards,
  rank 0 gathers), a Katib metric line from rank 0 (``epoch=3 val_auc=0.7120 val_log_loss=...``,
  then the epoch's seconds and samples/s) and a checkpoint (rank 0, atomic). On start every rank
  resumes from the latest checkpoint.
- At the end rank 0 exports ``model.onnx`` (checked against torch with onnxruntime), copies the
  feature spec, lookups and profile beside it (``copy_model_feature_files``: the model serves
  on its own) and writes ``training_metrics.json`` to the model URI.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import logging
import math
import os
import sys
import tempfile
import time
import warnings
from typing import Any

import fsspec
import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from kfstack.api import InvalidParameterError, TrainingFailedError, report_progress, write_report
from kfstack.api.training import (
    DistributedEnv,
    accuracy,
    list_checkpoints,
    load_checkpoint,
    log_loss,
    numeric_report,
    read_split,
    roc_auc,
    save_checkpoint,
    termination_message_on_failure,
    throughput,
    to_bytes,
    tuning_trial,
)
from kfstack_examples.flights.feature_spec import FeatureSpec, copy_model_feature_files
from kfstack_examples.flights.training.pytorch_model import (
    DelayClassifier,
    DelayProbability,
    ModelConfig,
)
from kfstack_examples.flights.training.settings import (
    METRICS_FILE,
    MODEL_FILE,
    metric_line,
    parse_trainer_args,
)

logger = logging.getLogger("kfstack.train_pytorch")

ONNX_TOLERANCE = 1e-4
CHECKPOINTS_KEPT = 2
PROCESS_GROUP_TIMEOUT = datetime.timedelta(minutes=10)


class RankData:
    """One split's rows for this rank, as tensors on the training device."""

    def __init__(self, spec: FeatureSpec, split_uri: str, env: DistributedEnv, device: torch.device):
        categorical, numeric, labels = read_split(spec, split_uri, env.rank, env.world_size)
        self.labels = torch.as_tensor(labels, device=device)
        self.categorical = torch.as_tensor(categorical, device=device)
        self.numeric = torch.as_tensor(numeric, device=device)

    def __len__(self) -> int:
        return self.labels.shape[0]


def agree_on_resume_epoch(checkpoint_uri: str, env: DistributedEnv, device: torch.device) -> int:
    """The epoch every rank resumes from (0: none): rank 0's newest checkpoint, broadcast.

    Ranks that listed the directory themselves could disagree (a listing that lags on an object
    store) and would then train different models under one DDP group.
    """
    found = list_checkpoints(checkpoint_uri) if env.is_chief else []
    epoch = torch.tensor([found[-1][0] if found else 0], dtype=torch.int64, device=device)
    if env.is_distributed:
        dist.broadcast(epoch, src=0)
    return int(epoch.item())


def _autocast(device: torch.device):
    # bf16 keeps fp32's exponent range, so no loss scaling is needed (unlike fp16).
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")


def steps_per_epoch(local_rows: int, per_rank_batch: int, env: DistributedEnv, device: torch.device) -> int:
    """The same step count on every rank: the smallest rank's number of full batches.

    DDP's all-reduce in ``backward`` waits for every rank, so a rank that ran out of batches
    early would leave the others blocked until the process-group timeout.

    Raises:
        InvalidParameterError: Some rank has less than one batch (on every rank alike, since
            all see the same minimum).
    """
    steps = torch.tensor([local_rows // per_rank_batch], device=device)
    if env.is_distributed:
        dist.all_reduce(steps, op=dist.ReduceOp.MIN)
    if int(steps.item()) < 1:
        raise InvalidParameterError(
            f"some rank has fewer train rows than its batch of {per_rank_batch} "
            f"(this rank: {local_rows}); lower batch_size or write larger shards"
        )
    return int(steps.item())


@torch.no_grad()
def predict(model: nn.Module, data: RankData, device: torch.device, batch: int = 65536) -> np.ndarray:
    model.eval()
    out = []
    for start in range(0, len(data), batch):
        with _autocast(device):
            logits = model(data.categorical[start : start + batch], data.numeric[start : start + batch])
        out.append(torch.sigmoid(logits.float()).cpu().numpy())
    return np.concatenate(out) if out else np.empty(0, dtype=np.float32)


def validate(
    model: nn.Module, data: RankData, env: DistributedEnv, device: torch.device
) -> dict[str, float] | None:
    """Scores the whole validation split; the metrics on rank 0, ``None`` elsewhere."""
    local = (data.labels.cpu().numpy(), predict(model, data, device))
    if env.is_distributed:
        gathered: list[Any] = [None] * env.world_size
        dist.all_gather_object(gathered, local)
    else:
        gathered = [local]
    if not env.is_chief:
        return None
    labels = np.concatenate([g[0] for g in gathered])
    probabilities = np.concatenate([g[1] for g in gathered])
    return {
        "val_auc": roc_auc(labels, probabilities),
        "val_log_loss": log_loss(labels, probabilities),
        "val_accuracy": accuracy(labels, probabilities),
        "val_rows": float(len(labels)),
    }


def export_onnx(classifier: DelayClassifier, sample: RankData, model_uri: str) -> float:
    """Writes ``model.onnx`` and returns its max abs difference to torch on ``sample`` rows.

    Raises:
        TrainingFailedError: onnxruntime disagrees with torch beyond :data:`ONNX_TOLERANCE`.
    """
    import onnxruntime  # deferred: only rank 0 exports

    serving = DelayProbability(classifier).cpu().float().eval()
    # >= 2 rows: the exporter specialises a batch dimension of size 1 to a constant.
    n = min(len(sample), 512)
    if n < 2:
        raise TrainingFailedError("the validation split needs at least 2 rows to export the model")
    categorical = sample.categorical[:n].cpu()
    numeric = sample.numeric[:n].cpu()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, MODEL_FILE)
        # One symbolic batch dimension shared by both inputs (and so by the output).
        batch = torch.export.Dim("batch")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # exporter chatter about merged dynamic axis names
            torch.onnx.export(
                serving,
                (categorical, numeric),
                path,
                input_names=["categorical", "numeric"],
                output_names=["probability"],
                dynamic_shapes={"categorical": {0: batch}, "numeric": {0: batch}},
                external_data=False,
                verbose=False,
            )
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        onnx_out = session.run(None, {"categorical": categorical.numpy(), "numeric": numeric.numpy()})[0]
        with torch.no_grad():
            torch_out = serving(categorical, numeric).numpy()
        difference = float(np.max(np.abs(onnx_out - torch_out))) if n else 0.0
        if difference > ONNX_TOLERANCE:
            raise TrainingFailedError(
                f"ONNX export disagrees with torch by {difference:.2e} (> {ONNX_TOLERANCE})"
            )
        fs, target = fsspec.core.url_to_fs(model_uri)
        fs.makedirs(target, exist_ok=True)
        fs.put_file(path, f"{target.rstrip('/')}/{MODEL_FILE}")
    return difference


def train(args: argparse.Namespace) -> dict[str, Any] | None:
    """Runs this rank's part of the job (see the module docstring).

    Returns:
        On rank 0 what it wrote to ``training_metrics.json``; ``None`` on the other ranks.
    """
    env = DistributedEnv.from_env()
    device = torch.device(f"cuda:{env.local_rank}" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if env.is_distributed:
        dist.init_process_group(
            backend="nccl" if device.type == "cuda" else "gloo",
            init_method=f"tcp://{env.master_addr}:{env.master_port}",
            rank=env.rank,
            world_size=env.world_size,
            timeout=PROCESS_GROUP_TIMEOUT,
        )
    logger.info("rank %d of %d on %s", env.rank, env.world_size, device)
    torch.manual_seed(args.seed)  # identical initial weights on every rank

    spec = FeatureSpec.load(args.features_uri)
    train_data = RankData(spec, f"{args.features_uri.rstrip('/')}/train", env, device)
    validation_data = RankData(spec, f"{args.features_uri.rstrip('/')}/validation", env, device)
    per_rank_batch = max(1, args.batch_size // env.world_size)
    steps = steps_per_epoch(len(train_data), per_rank_batch, env, device)
    logger.info(
        "rank %d: %d train rows, %d steps/epoch of %d", env.rank, len(train_data), steps, per_rank_batch
    )

    classifier = DelayClassifier(ModelConfig(tuple(spec.cardinalities), len(spec.numeric))).to(device)
    # The fused kernel (CUDA and CPU) updates all parameters in one call: per-tensor Adam was a
    # third of a CPU step for this small, overhead-bound MLP.
    optimizer = torch.optim.Adam(classifier.parameters(), lr=args.learning_rate, fused=True)
    history: list[dict[str, float]] = []
    start_epoch, train_seconds, samples = 1, 0.0, 0
    resume_epoch = agree_on_resume_epoch(args.checkpoint_uri, env, device)
    if resume_epoch:
        payload = load_checkpoint(args.checkpoint_uri, resume_epoch)
        state = torch.load(io.BytesIO(payload), map_location=device, weights_only=False)
        classifier.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"].cpu())
        history, train_seconds, samples = state["history"], state["train_seconds"], state["samples"]
        start_epoch = resume_epoch + 1
        logger.info("rank %d: resumed from checkpoint of epoch %d", env.rank, resume_epoch)
    model: nn.Module = classifier
    if env.is_distributed:
        model = DistributedDataParallel(
            classifier, device_ids=[device.index] if device.type == "cuda" else None
        )
    loss_fn = nn.BCEWithLogitsLoss()

    for epoch in range(start_epoch, args.epochs + 1):
        model.train()
        generator = torch.Generator(device=device).manual_seed(args.seed * 100_003 + epoch * 1_009 + env.rank)
        order = torch.randperm(len(train_data), generator=generator, device=device)
        started = time.perf_counter()
        # One gather per epoch, then every batch is a contiguous slice (a view, no copy).
        categorical = train_data.categorical.index_select(0, order)
        numeric = train_data.numeric.index_select(0, order)
        labels = train_data.labels.index_select(0, order)
        for step in range(steps):
            batch = slice(step * per_rank_batch, (step + 1) * per_rank_batch)
            with _autocast(device):
                logits = model(categorical[batch], numeric[batch])
            loss = loss_fn(logits.float(), labels[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        epoch_seconds = time.perf_counter() - started
        epoch_samples = steps * per_rank_batch * env.world_size
        train_seconds += epoch_seconds
        samples += epoch_samples
        scores = validate(model, validation_data, env, device)
        if scores is not None:  # the chief's
            scores.update(
                train_loss=float(loss.item()), train_seconds=epoch_seconds, train_samples=float(epoch_samples)
            )
            history.append({"epoch": epoch, **scores})
            epoch_throughput = throughput(epoch_seconds, epoch_samples, epochs=1, replicas=env.world_size)
            print(metric_line(epoch, {**scores, **epoch_throughput}), flush=True)
            report_progress("epoch", epoch, args.epochs)
            state = {
                "model": classifier.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch": epoch,
                "rng": torch.get_rng_state(),
                "history": history,
                "train_seconds": train_seconds,
                "samples": samples,
            }
            save_checkpoint(
                args.checkpoint_uri,
                epoch,
                to_bytes(torch.save, state),
                keep=CHECKPOINTS_KEPT,
            )
        if env.is_distributed:
            dist.barrier()  # nobody runs ahead of a checkpoint a restart would resume from

    result: dict[str, Any] | None = None
    # A tuning trial's result is its metric lines: nothing keeps its model, so none is written.
    keeps_model = not tuning_trial()
    if env.is_chief:
        difference = math.nan
        if keeps_model:
            difference = export_onnx(classifier, validation_data, args.model_uri)
            copy_model_feature_files(args.features_uri, args.model_uri)
        last = history[-1] if history else {}
        result = {
            "val_auc": last.get("val_auc", math.nan),
            "val_log_loss": last.get("val_log_loss", math.nan),
            "val_accuracy": last.get("val_accuracy", math.nan),
            # history covers every epoch train_seconds sums, those of earlier attempts too.
            **throughput(train_seconds, samples, epochs=len(history), replicas=env.world_size),
            "epochs": float(args.epochs),
            "world_size": float(env.world_size),
            "resumed_from_epoch": float(start_epoch - 1),
            "onnx_max_abs_difference": difference,
            "history": history,
            "device": device.type,
        }
        if keeps_model:
            with fsspec.open(f"{args.model_uri.rstrip('/')}/{METRICS_FILE}", "w") as f:
                json.dump(result, f, indent=2)
        # Run as a team's code by the generic training step: its numbers are the step's report.
        write_report(numeric_report(result))
    if env.is_distributed:
        dist.barrier()
        dist.destroy_process_group()
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return parse_trainer_args(argv, prog="python -m kfstack_examples.flights.training.pytorch_trainer")


def main(argv: list[str] | None = None) -> int:
    # Our progress at INFO; the ONNX exporter's pass-by-pass chatter only when it warns.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kfstack").setLevel(logging.INFO)
    # The exporter warns about optional torchvision ops this model never uses.
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    # A failed trial's output may be in Katib's metrics file: its error also goes to the pod.
    with termination_message_on_failure():
        train(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
