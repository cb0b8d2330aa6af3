"""The delay classifier: one embedding per categorical feature, concatenated with the numeric
features, through a small MLP to one logit.

Inputs follow the feature spec (:mod:`kfstack_examples.flights.feature_spec`): ``categorical`` int64
``[batch, n_categorical]`` (vocabulary indices, OOV included in each cardinality) and ``numeric``
float32 ``[batch, n_numeric]`` (already imputed and scaled).
"""

from __future__ import annotations

import torch
from torch import nn

from kfstack_examples.flights.training.architecture import ModelConfig, embedding_dim

__all__ = ["DelayClassifier", "DelayProbability", "ModelConfig", "embedding_dim"]


class DelayClassifier(nn.Module):
    """Returns logits ``[batch]``; :class:`DelayProbability` wraps it for serving."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.ModuleList(
            nn.Embedding(card, embedding_dim(card)) for card in config.cardinalities
        )
        width = sum(embedding_dim(c) for c in config.cardinalities) + config.num_numeric
        layers: list[nn.Module] = []
        for hidden in config.hidden:
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, categorical: torch.Tensor, numeric: torch.Tensor) -> torch.Tensor:
        embedded = [emb(categorical[:, i]) for i, emb in enumerate(self.embeddings)]
        return self.mlp(torch.cat([*embedded, numeric], dim=1)).squeeze(1)


class DelayProbability(nn.Module):
    """The exported graph: inputs ``categorical``, ``numeric`` -> ``probability`` ``[batch]``."""

    def __init__(self, classifier: DelayClassifier):
        super().__init__()
        self.classifier = classifier

    def forward(self, categorical: torch.Tensor, numeric: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.classifier(categorical, numeric))
