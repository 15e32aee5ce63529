"""XML-Q's training losses.

- ``soft_f1``: eBay §3.3.2. Per query, with t the 0/1 targets and p = σ(y) the predicted
  probabilities: soft TP = Σ t_l p_l, soft positive predictions = ‖p‖²₂, so
  precision = TP/‖p‖², recall = TP/Σt and F1 = 2·TP / (‖p‖² + Σt). The loss is 1 − F1,
  averaged over the batch.
- ``binary_crossentropy``: XML-CNN's loss, for the XML-CNN* ablation.
- ``StochasticNegativeMining``: Reddi et al. 2019, Algorithm 1, on the logits v. For each
  positive label y of a query: sample B labels uniformly from the query's negatives, sort
  their scores, keep the top k, and apply φ either pairwise (POWL: Σ_j ϑ_j φ(v_y − v_[j]))
  or binary (BOWL: φ(v_y) + Σ_j ϑ_j φ(−v_[j])), with ϑ_j = 1/k for the k kept and φ the
  hinge max(1 − u, 0) or the logistic log2(1 + e^(−u)).
"""

from __future__ import annotations

import keras
from keras import ops

EPSILON = 1e-7


def soft_f1(targets, probabilities):
    targets = ops.cast(targets, probabilities.dtype)
    true_positive = ops.sum(targets * probabilities, axis=-1)
    predicted_positive = ops.sum(ops.square(probabilities), axis=-1)
    f1 = 2.0 * true_positive / (predicted_positive + ops.sum(targets, axis=-1) + EPSILON)
    return 1.0 - f1


def binary_crossentropy(targets, probabilities):
    return keras.losses.binary_crossentropy(ops.cast(targets, probabilities.dtype), probabilities)


def _phi(name: str, u):
    if name == "hinge":
        return ops.relu(1.0 - u)
    if name == "logistic":
        return ops.softplus(-u) / ops.log(2.0)
    raise ValueError(f"unknown φ {name!r}; expected hinge or logistic")


class StochasticNegativeMining(keras.losses.Loss):
    """Top-k SNM over logits (see the module doc). ``kind`` is ``powl`` or ``bowl``."""

    def __init__(self, sampled: int = 64, top_k: int = 8, kind: str = "powl", phi: str = "hinge",
                 seed: int = 0, name: str = "snm", **kwargs):
        super().__init__(name=name, **kwargs)
        if not 1 <= top_k <= sampled:
            raise ValueError(f"SNM needs 1 <= k <= B, got k={top_k}, B={sampled}")
        if kind not in ("powl", "bowl"):
            raise ValueError(f"unknown SNM loss type {kind!r}; expected powl or bowl")
        _phi(phi, ops.zeros(()))  # validates the name
        self.sampled, self.top_k, self.kind, self.phi = sampled, top_k, kind, phi
        self.seed_generator = keras.random.SeedGenerator(seed, name="snm_seed_generator")

    def call(self, targets, logits):
        targets = ops.cast(targets, logits.dtype)
        # Uniform sampling without replacement among the negatives: the B negatives with the
        # largest random keys. Positives get key -1 so they are never drawn.
        keys = keras.random.uniform(ops.shape(logits), seed=self.seed_generator)
        keys = ops.where(targets > 0, -1.0, keys)
        _, sampled = ops.top_k(keys, k=self.sampled)
        sampled_scores = ops.take_along_axis(logits, sampled, axis=-1)
        sampled_valid = ops.cast(ops.take_along_axis(keys, sampled, axis=-1) >= 0, logits.dtype)
        # Keep the k hardest sampled negatives (an invalid draw, when a query has fewer
        # than B negatives, is pushed to the bottom and masked).
        ranked_scores = ops.where(sampled_valid > 0, sampled_scores, -1e9)
        hardest, order = ops.top_k(ranked_scores, k=self.top_k)
        hardest_valid = ops.take_along_axis(sampled_valid, order, axis=-1)
        weight = 1.0 / self.top_k
        if self.kind == "bowl":
            negatives = ops.sum(weight * hardest_valid * _phi(self.phi, -hardest), axis=-1)
            positives = ops.sum(targets * _phi(self.phi, logits), axis=-1)
            return positives + negatives * ops.sum(targets, axis=-1)
        # POWL: every positive against each kept negative.
        pairwise = _phi(self.phi, logits[:, :, None] - hardest[:, None, :])  # (batch, labels, k)
        per_label = ops.sum(weight * hardest_valid[:, None, :] * pairwise, axis=-1)
        return ops.sum(targets * per_label, axis=-1)

    def get_config(self) -> dict:
        return super().get_config() | {"sampled": self.sampled, "top_k": self.top_k, "kind": self.kind, "phi": self.phi}
