"""XML-Q on several devices (``qcat train xmlq --distributed``):

- TensorFlow: across workers with ``tf.distribute`` (MultiWorkerMirroredStrategy; TensorFlow is
  imported only here, by the functions that need it);
- JAX: Keras' ``keras.distribution.DataParallel`` over this machine's devices (one process, all
  its accelerators): the variables are replicated, each batch is split across the devices and
  the gradients are averaged over the whole batch, so the run is the one-device run up to the
  order of floating-point sums (tests/test_xmlq_data_parallel.py states the tolerance). Every
  batch must split evenly: the batch size must be a multiple of the device count, the last
  batch of an epoch is cut to one (:func:`device_multiple`, read by the trainer's batches) and
  the validation sets are padded to one for prediction. Several hosts
  (``jax.distributed``) are not wired.
"""

from __future__ import annotations

import keras
import numpy as np


def data_parallel(batch_size: int) -> keras.distribution.DataParallel:
    """DataParallel over every device JAX sees (``batch_size`` must split evenly across them)."""
    if keras.backend.backend() != "jax":
        raise ValueError(f"Keras' DataParallel is wired for KERAS_BACKEND=jax, not {keras.backend.backend()}")
    devices = keras.distribution.list_devices()
    if batch_size % len(devices):
        raise ValueError(f"the batch size ({batch_size}) must be a multiple of the {len(devices)} devices, so that "
                         f"every batch splits evenly across them")
    return keras.distribution.DataParallel(devices=devices)


def describe_data_parallel(distribution: keras.distribution.DataParallel) -> str:
    devices = list(distribution.device_mesh.devices.flatten())
    return f"distributed: data parallel over {len(devices)} devices ({', '.join(str(d) for d in devices)})"


def device_multiple() -> int:
    """The number every batch must be a multiple of: the devices of the Keras distribution in
    force (1 without one)."""
    distribution = keras.distribution.distribution()
    return int(distribution.device_mesh.devices.size) if distribution is not None else 1


def input_pipeline(tokens: np.ndarray, labels: np.ndarray, n_labels: int, batch_size: int, seed: int | None,
                   weights: np.ndarray | None = None):
    """Batches of (token ids, multi-hot targets[, sample weights]) as a ``tf.data.Dataset``; shuffled when ``seed``."""
    import tensorflow as tf

    parts = (tokens, labels) if weights is None else (tokens, labels, weights.astype(np.float32))
    data = tf.data.Dataset.from_tensor_slices(parts)
    if seed is not None:
        data = data.shuffle(len(tokens), seed=seed, reshuffle_each_iteration=True)

    def to_dense(*batch):
        multi_hot = tf.reduce_max(tf.one_hot(batch[1], n_labels), axis=1)  # -1 pads give zero rows
        # Token ids travel as float32 (exact below 2^24) and the model's int32 input casts
        # them back: under a distribution strategy Keras averages a first batch across
        # workers to build the model, which fails on integer tensors.
        return (tf.cast(batch[0], tf.float32), multi_hot) + tuple(batch[2:])

    return data.batch(batch_size).map(to_dense, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def fit_multi_worker(trainable: keras.Model, config, data, strategy, monitor: keras.callbacks.Callback,
                     initial_epoch: int, loss_function) -> None:
    """The training loop across workers, written out: Keras 3.15's ``fit`` fails to
    average its logs under MultiWorkerMirroredStrategy. Each replica computes the loss on its
    share of the global batch; the optimizer all-reduces the gradients, so every worker
    applies the same update. ``loss_function`` returns one value per query."""
    import tensorflow as tf

    optimizer = trainable.optimizer
    distributed = strategy.experimental_distribute_dataset(data)

    def replica_step(tokens, targets, *weights):
        with tf.GradientTape() as tape:
            per_example = loss_function(targets, trainable(tokens, training=True))
            if weights:
                per_example = per_example * weights[0]
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=config.batch_size)
        gradients = tape.gradient(loss, trainable.trainable_variables)
        optimizer.apply_gradients(zip(gradients, trainable.trainable_variables))
        return loss

    @tf.function
    def step(batch):
        return strategy.reduce("SUM", strategy.run(replica_step, args=batch), axis=None)

    monitor.set_model(trainable)
    for epoch in range(initial_epoch, config.epochs):
        losses = [float(step(batch)) for batch in distributed]
        monitor.on_epoch_end(epoch, {"loss": float(np.mean(losses))})
        if trainable.stop_training:
            break
    monitor.on_train_end()
