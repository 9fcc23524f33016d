"""LSTM with a projection of its output (LSTMP), one direction, as in ELMo."""

import keras
import tensorflow as tf

from tfnlp import _checks, _devices


def _clip(name, value):
    return _checks.positive_float(name, value, allow_none=True)


@keras.saving.register_keras_serializable(package="tfnlp")
class ProjectedLSTM(keras.layers.Layer):
    """LSTM whose output is projected to a smaller size (Sak et al., 2014).

    Per step, with `x_t` the input and `r_{t-1}` the previous *projected*
    output (gates in Keras order i, f, g, o):

        z = x_t W + r_{t-1} U + b
        c_t = σ(z_f) ⊙ c_{t-1} + σ(z_i) ⊙ tanh(z_g)      (clipped to ±cell_clip)
        r_t = (σ(z_o) ⊙ tanh(c_t)) P                       (clipped to ±projection_clip)

    so the recurrent matmul and the output are `projection_dim` wide while
    the memory is `units` wide (ELMo: 4096 cells, 512 outputs). Without
    `projection_dim` it is a plain LSTM (`r_t = h_t`).

    `x W` is computed for all steps in one matmul before the recurrence,
    which then only multiplies the small `r_{t-1} U` per step, inside one
    `tf.while_loop` (or unrolled in Python with `unroll=True` when the number
    of steps is static). `benchmarks/elmo_benchmark.py` compares this with
    `keras.layers.RNN` over an equivalent cell. Under a mixed-precision
    policy the matmuls run in the compute dtype (e.g. bfloat16) and the
    gates and cell state in float32.

    With `go_backwards=True` each sequence is read from its last real token
    to its first (`tf.reverse_sequence` over its length), and the outputs
    are returned in the original order: the output at `t` then summarises
    tokens `t..end`. Padding must be at the end of each row (right padding,
    as every tfnlp pipeline produces); padded steps never influence real
    ones in either direction, and their outputs are zeros. Inputs with no
    time steps (`T = 0`) give outputs of shape `(B, 0, output_dim)`.

    Args:
        units: int, cell (memory) size.
        projection_dim: int or None, output size.
        cell_clip: positive float or None, clip the cell state to ±value.
        projection_clip: positive float or None, clip the output to ±value.
        go_backwards: bool, read each sequence right to left.
        unroll: bool, unroll the recurrence in Python (static lengths only).
        kernel_initializer: initializer of the input kernel `W`.
        recurrent_initializer: initializer of `U`.
        projection_initializer: initializer of `P`.
        unit_forget_bias: bool, start the forget-gate bias at 1.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor `(B, T, D)`.
        padding_mask: optional int/bool `(B, T)`, 1 for real tokens
            (right-padded).

    Returns:
        Tensor `(B, T, projection_dim or units)`.

    Example:

    >>> lstm = ProjectedLSTM(32, projection_dim=8, cell_clip=3.0, projection_clip=3.0)
    >>> lstm(keras.ops.ones((2, 5, 4)), padding_mask=tf.constant([[1] * 5, [1, 1, 0, 0, 0]])).shape
    TensorShape([2, 5, 8])

    References:
        Sak et al., "Long Short-Term Memory Based Recurrent Neural Network
        Architectures for Large Vocabulary Speech Recognition", 2014.
        Peters et al., "Deep contextualized word representations", 2018.
    """

    def __init__(
        self,
        units,
        projection_dim=None,
        cell_clip=None,
        projection_clip=None,
        go_backwards=False,
        unroll=False,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        projection_initializer="glorot_uniform",
        unit_forget_bias=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = _checks.positive_int("units", units)
        self.projection_dim = _checks.positive_int("projection_dim", projection_dim, allow_none=True)
        self.cell_clip = _clip("cell_clip", cell_clip)
        self.projection_clip = _clip("projection_clip", projection_clip)
        if self.projection_clip is not None and self.projection_dim is None:
            raise ValueError("`projection_clip` needs a `projection_dim`.")
        self.go_backwards = bool(go_backwards)
        self.unroll = bool(unroll)
        initializer = _checks.initializer
        self.kernel_initializer = initializer("kernel_initializer", kernel_initializer)
        self.recurrent_initializer = initializer("recurrent_initializer", recurrent_initializer)
        self.projection_initializer = initializer("projection_initializer", projection_initializer)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.output_dim = self.projection_dim or self.units

    def build(self, inputs_shape, padding_mask_shape=None):
        input_dim = _checks.last_dim("inputs", inputs_shape)
        if len(inputs_shape) != 3:
            raise ValueError(f"`inputs` must have rank 3 (batch, steps, features), got {inputs_shape}.")
        units = self.units
        self.kernel = self.add_weight(
            name="kernel", shape=(input_dim, 4 * units), initializer=self.kernel_initializer
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel",
            shape=(self.output_dim, 4 * units),
            initializer=self.recurrent_initializer,
        )
        bias = [0.0] * (4 * units)
        if self.unit_forget_bias:
            bias[units : 2 * units] = [1.0] * units
        self.bias = self.add_weight(
            name="bias", shape=(4 * units,), initializer=keras.initializers.Constant(bias)
        )
        if self.projection_dim is not None:
            self.projection = self.add_weight(
                name="projection",
                shape=(units, self.projection_dim),
                initializer=self.projection_initializer,
            )
        self.built = True

    def _step(self, xw_t, cell, output, recurrent_kernel, projection):
        # Matmuls in the compute dtype; gates and the cell state in float32,
        # so a bfloat16 policy does not round the memory at every step.
        z = tf.cast(xw_t + tf.matmul(output, recurrent_kernel), tf.float32)
        i, f, g, o = tf.split(z, 4, axis=-1)
        cell = tf.sigmoid(f) * cell + tf.sigmoid(i) * tf.tanh(g)
        if self.cell_clip is not None:
            cell = tf.clip_by_value(cell, -self.cell_clip, self.cell_clip)
        output = tf.cast(tf.sigmoid(o) * tf.tanh(cell), xw_t.dtype)
        if projection is not None:
            output = tf.matmul(output, projection)
            if self.projection_clip is not None:
                output = tf.clip_by_value(output, -self.projection_clip, self.projection_clip)
        return cell, output

    @_checks.errors_without_input_dump()
    def call(self, inputs, padding_mask=None):
        _checks.tensors(
            ("inputs", inputs, "BTD", "number"),
            ("padding_mask", padding_mask, "BT", "mask"),
            D=self.kernel.shape[0],
        )
        dtype = self.compute_dtype
        inputs = tf.cast(inputs, dtype)
        batch_size, num_steps = tf.shape(inputs)[0], tf.shape(inputs)[1]
        if padding_mask is not None:
            mask = tf.cast(padding_mask, tf.bool)
            lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
        else:
            mask, lengths = None, tf.fill([batch_size], num_steps)
        if self.go_backwards:
            inputs = _reverse_within_lengths(inputs, lengths)

        kernel = tf.cast(self.kernel, dtype)
        recurrent_kernel = tf.cast(self.recurrent_kernel, dtype)
        projection = tf.cast(self.projection, dtype) if self.projection_dim is not None else None
        # All input projections at once: (B*T, D) x (D, 4U).
        xw = tf.matmul(tf.reshape(inputs, [-1, inputs.shape[-1]]), kernel) + tf.cast(self.bias, dtype)
        xw = tf.transpose(tf.reshape(xw, [batch_size, num_steps, 4 * self.units]), [1, 0, 2])
        cell = tf.zeros([batch_size, self.units], tf.float32)
        output = tf.zeros([batch_size, self.output_dim], dtype)

        static_steps = inputs.shape[1]
        if static_steps == 0:
            outputs = tf.zeros([batch_size, 0, self.output_dim], dtype)
        elif self.unroll and static_steps is not None:
            outputs = []
            for t in range(static_steps):
                cell, output = self._step(xw[t], cell, output, recurrent_kernel, projection)
                outputs.append(output)
            outputs = tf.stack(outputs, axis=1)
        else:
            loop_steps = num_steps
            if static_steps is None:
                # T may be 0 at run time: then one zero step runs and its output
                # is dropped (stacking no steps needs a known element shape,
                # and XLA compiles the loop body even when it never runs).
                loop_steps = tf.maximum(num_steps, 1)
                xw = tf.pad(xw, [[0, loop_steps - num_steps], [0, 0], [0, 0]])
            steps = tf.TensorArray(dtype, size=loop_steps).unstack(xw)
            written = tf.TensorArray(dtype, size=loop_steps)

            def body(t, cell, output, written):
                cell, output = self._step(steps.read(t), cell, output, recurrent_kernel, projection)
                return t + 1, cell, output, written.write(t, output)

            # `maximum_iterations` bounds the loop: XLA needs it to differentiate
            # the while loop (fixed-size gradient accumulators).
            _, _, _, written = tf.while_loop(
                lambda t, *_: t < loop_steps,
                body,
                (0, cell, output, written),
                maximum_iterations=loop_steps,
            )
            outputs = written.stack()
            if static_steps is None:
                outputs = outputs[:num_steps]
            outputs = tf.transpose(outputs, [1, 0, 2])  # (B, T, output_dim)
            outputs = tf.ensure_shape(outputs, [None, static_steps, self.output_dim])

        if self.go_backwards:
            outputs = _reverse_within_lengths(outputs, lengths)
        if mask is not None:
            outputs = tf.where(mask[:, :, None], outputs, tf.zeros_like(outputs))
        return outputs

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None):
        return tuple(inputs_shape[:2]) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "projection_dim": self.projection_dim,
                "cell_clip": self.cell_clip,
                "projection_clip": self.projection_clip,
                "go_backwards": self.go_backwards,
                "unroll": self.unroll,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
                "projection_initializer": keras.initializers.serialize(self.projection_initializer),
                "unit_forget_bias": self.unit_forget_bias,
            }
        )
        return config


def _reverse_within_lengths(x, lengths):
    """`x` `(B, T, ...)` with each row's first `lengths[b]` steps reversed.

    `tf.reverse_sequence`, except under XLA when `T` is known only at run
    time: XLA's lowering of it fails on `T = 0` ("Slice size ... out of
    range"), and it lowers to a gather anyway, so the gather is written out.
    """
    if x.shape[1] is not None or not _devices.in_xla_context():
        return tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
    positions = tf.range(tf.shape(x)[1])[None, :]
    lengths = tf.cast(lengths, tf.int32)[:, None]
    return tf.gather(x, tf.where(positions < lengths, lengths - 1 - positions, positions), batch_dims=1)
