"""How tfnlp's tf.data pipelines are tuned: statically, not by tf.data's autotuner.

Every dataset a `tfnlp.data` builder returns has `options().autotune.enabled`
set to False. tf.data then runs each `num_parallel_calls=AUTOTUNE` map with
`min(16, CPU cores)` parallel calls and grows each `prefetch(AUTOTUNE)`
buffer when the consumer finds it empty, without the autotuner's model and
its background thread. The batches are the same either way (tfnlp's maps are
deterministic), only the speed differs.

Why: under `model.fit` on a 2-core CPU, with the autotuner on, training steps
intermittently stretched to whole multiples of the autotuner's period, and
BERT-tiny runs of the pretraining and text-classifier examples were slower end
to end, with the same results (figures in `benchmarks/README.md`, "tf.data
autotuning under `model.fit`"; many-core CPUs and GPU hosts were not measured).

To hand a pipeline back to the autotuner (e.g. on a large machine where you
have measured it to help), set the option again: the latest setting wins.

    options = tf.data.Options()
    options.autotune.enabled = True
    dataset = dataset.with_options(options)
"""

import tensorflow as tf


def static_tuning(dataset):
    """`dataset` with tf.data's autotuner off (tfnlp's pipelines all use this).

    Parallel maps declared with `num_parallel_calls=tf.data.AUTOTUNE` then
    run `min(16, CPU cores)` calls at once, and `prefetch(tf.data.AUTOTUNE)`
    buffers grow on demand; see the module docstring for the measurements
    behind it. Apply it to your own pipelines the same way; a later
    `with_options` that enables autotuning overrides it.

    Args:
        dataset: a `tf.data.Dataset`.

    Returns:
        The dataset with `options().autotune.enabled == False`; its elements
        are unchanged.

    Example:

    >>> dataset = static_tuning(tf.data.Dataset.range(3).map(
    ...     lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE))
    >>> dataset.options().autotune.enabled, [int(x) for x in dataset]
    (False, [0, 2, 4])
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"`dataset` must be a tf.data.Dataset, got {type(dataset).__name__}.")
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def _prefetched(dataset):
    """The last step of tfnlp's pipelines: `prefetch(AUTOTUNE)`, then `static_tuning`."""
    return static_tuning(dataset.prefetch(tf.data.AUTOTUNE))
