"""The evaluation step by hand: score a labelled split with onnxruntime, compute the metrics.

    python -m benchmarks.by_hand.evaluate --model-dir M --dataset D --label L --task binary|multiclass \\
        [--scorer flights|onnx] [--threshold 0.5]

``--scorer flights``: the rows are raw flight records (all columns but the label), featurised and
scored by the team's own ``FlightScorer`` (the ONNX graph on onnxruntime, one call for the whole
split); ``onnx``: the feature columns as one float32 matrix into the model's ``model.onnx``. The
metrics are scikit-learn's: binary AUC, log loss, accuracy, precision, recall at the threshold,
the confusion matrix; multiclass accuracy, macro-F1, log loss and the confusion matrix. Prints them
as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np


def predictions(scorer: str, model_dir: str, dataset: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    """(labels, predictions) of every row of the Parquet ``dataset`` (a file or a folder)."""
    import pyarrow.dataset as ds

    table = ds.dataset(dataset, format="parquet").to_table()
    labels = table.column(label).to_numpy(zero_copy_only=False)
    features = table.drop_columns([label])
    if scorer == "flights":
        from kfstack_examples.flights.scoring import FlightScorer

        return labels, FlightScorer(model_dir).predict(features.to_pylist())
    import onnxruntime

    session = onnxruntime.InferenceSession(
        os.path.join(model_dir, "model.onnx"), providers=["CPUExecutionProvider"]
    )
    matrix = np.column_stack(
        [column.to_numpy(zero_copy_only=False).astype(np.float32) for column in features.columns]
    )
    [output] = session.run(None, {session.get_inputs()[0].name: matrix})[:1]
    return labels, np.asarray(output)


def metrics(task: str, labels: np.ndarray, scores: np.ndarray, threshold: float) -> dict:
    from sklearn import metrics as m

    if task == "binary":
        p = scores.reshape(-1).astype(np.float64)
        predicted = (p >= threshold).astype(int)
        return {
            "auc": float(m.roc_auc_score(labels, p)),
            "log_loss": float(m.log_loss(labels, np.clip(p, 1e-7, 1 - 1e-7), labels=[0, 1])),
            "accuracy": float(m.accuracy_score(labels, predicted)),
            "precision": float(m.precision_score(labels, predicted, zero_division=0)),
            "recall": float(m.recall_score(labels, predicted, zero_division=0)),
            "confusion": m.confusion_matrix(labels, predicted, labels=[0, 1]).tolist(),
            "rows": len(labels),
        }
    predicted = scores.argmax(axis=1)
    return {
        "accuracy": float(m.accuracy_score(labels, predicted)),
        "macro_f1": float(m.f1_score(labels, predicted, average="macro")),
        "log_loss": float(m.log_loss(labels, np.clip(scores, 1e-7, 1.0), labels=range(scores.shape[1]))),
        "confusion": m.confusion_matrix(labels, predicted).tolist(),
        "rows": len(labels),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--task", required=True, choices=("binary", "multiclass"))
    parser.add_argument("--scorer", default="onnx", choices=("flights", "onnx"))
    parser.add_argument("--threshold", type=float, default=0.5)
    args = parser.parse_args(argv)
    labels, scores = predictions(args.scorer, args.model_dir, args.dataset, args.label)
    print(json.dumps(metrics(args.task, labels, scores, args.threshold)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
