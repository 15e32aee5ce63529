"""XML-Q's training settings (:class:`XMLQConfig`) and what they make for Keras: the loss, the
learning rate (cosine decay with restarts, eBay §3.3.3, counted in steps of an epoch) and the model
Keras trains."""

from __future__ import annotations

from dataclasses import dataclass, field

import keras

from qcat.training.xmlq.losses import StochasticNegativeMining, binary_crossentropy, soft_f1
from qcat.training.xmlq.model import PRESETS

LOSSES = ("soft-f1", "bce", "snm")
EMBEDDING_INITS = ("random", "skipgram")  # random: the paper's; skipgram: qcat.training.xmlq.embedding_init


@dataclass(frozen=True)
class XMLQConfig:
    preset: str = "small"
    loss: str = "soft-f1"
    rnn: bool = True
    cosine: bool = True  # False: a constant learning rate of 1e-3
    learning_rate: float = 1e-3
    epochs: int = 8
    batch_size: int = 256
    patience: int = 2
    min_token_count: int = 2
    max_vocabulary: int = 100_000
    seed: int = 0
    init_embeddings: str = "random"
    skipgram_epochs: int = 5  # read only with init_embeddings "skipgram"
    query_short_forms: bool = False  # qcat.training.catalog.query_short_forms (the data fingerprint sees it too)
    snm: dict = field(default_factory=lambda: {"sampled": 64, "top_k": 8, "kind": "powl", "phi": "hinge"})

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; expected one of {', '.join(PRESETS)}")
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; expected one of {', '.join(LOSSES)}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError("epochs and batch size must be positive")
        if self.init_embeddings not in EMBEDDING_INITS:
            raise ValueError(f"unknown embedding init {self.init_embeddings!r}; expected one of "
                             f"{', '.join(EMBEDDING_INITS)}")
        if self.skipgram_epochs < 1:
            raise ValueError(f"skip-gram epochs must be at least 1, got {self.skipgram_epochs}")


def steps_per_epoch(n: int, batch_size: int) -> int:
    return max(1, -(-n // batch_size))


def learning_rate(config: XMLQConfig, n_train: int):
    if not config.cosine:
        return config.learning_rate
    return keras.optimizers.schedules.CosineDecayRestarts(
        config.learning_rate, first_decay_steps=2 * steps_per_epoch(n_train, config.batch_size), t_mul=2.0, m_mul=0.8,
    )


def compile_for(config: XMLQConfig, network: keras.Model, n_train: int) -> keras.Model:
    """The model Keras trains: the network itself, or its logits for SNM."""
    optimizer = keras.optimizers.Adam(learning_rate(config, n_train))
    trainable = network
    loss = loss_for(config, reduction="sum_over_batch_size")
    if config.loss == "snm":
        trainable = keras.Model(network.input, network.get_layer("logits").output)
        # The loss draws its negatives from a SeedGenerator. Tracked by the model, its state is
        # part of the training state, which JAX's stateless train step carries from step to
        # step (untracked, JAX would draw the same negatives at every step) and checkpoints save.
        trainable.snm_seed_generator = loss.seed_generator
    trainable.compile(optimizer=optimizer, loss=loss)
    return trainable


def loss_for(config: XMLQConfig, reduction: str | None):
    """The configured loss; with ``reduction=None`` one value per query."""
    if config.loss == "snm":
        return StochasticNegativeMining(seed=config.seed, reduction=reduction, **config.snm)
    return soft_f1 if config.loss == "soft-f1" else binary_crossentropy  # both per query
