"""Seeding XML-Q's training the same way under every Keras backend, without importing a framework
the backend does not use."""

from __future__ import annotations

import keras
import numpy as np


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy, Keras' global seed generator and the backend. Under TensorFlow, with op
    determinism. Under another backend TensorFlow is not imported: ``keras.utils.set_random_seed``
    imports it wherever it is installed, only to seed it (issue 45, item 22), so this does the
    rest of what that function does itself."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        keras.utils.set_random_seed(seed)
        tf.config.experimental.enable_op_determinism()
        return
    import random

    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)  # recreated from the seed
    random.seed(seed)
    np.random.seed(seed)
    if keras.backend.backend() == "torch":
        import torch

        torch.manual_seed(seed)
