"""Multi-head attention with explicit and implicit masks and a key/value cache."""

import math

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.layers import masks as masks_lib
from tfnlp.layers._keras_masks import keras_mask, without_keras_mask
from tfnlp.layers.dropout import Dropout, apply_keep_mask


def check_attention_mask(attention_mask, queries, key_length):
    """`attention_mask` checked as `(B, T, S)` against the `(B, T, ...)` queries and the key length.

    Each axis must match or be 1 (broadcast). Static sizes are checked when
    traced; a batch size known only at run time is checked then (the
    returned mask carries the check).
    """
    attention_mask = tf.convert_to_tensor(attention_mask)
    shape = attention_mask.shape
    if shape.rank is not None and shape.rank != 3:
        raise ValueError(
            "`attention_mask` must have shape (B, T, S) (rank 3), got shape "
            f"{shape}."
        )
    if shape.rank is None:  # it meets (B, T, S)-shaped ops: check the rank when it runs
        check = tf.debugging.assert_rank(
            attention_mask, 3, message="`attention_mask` must have shape (B, T, S) (rank 3)"
        )
        with tf.control_dependencies([check]):
            attention_mask = tf.identity(attention_mask)
        attention_mask.set_shape((None, None, None))
        shape = attention_mask.shape
    sizes = (queries.shape[0], queries.shape[1], key_length)
    for axis, (expected, what) in enumerate(zip(sizes, ("B", "T", "S"), strict=True)):
        size = shape[axis]
        if size is not None and expected is not None and size not in (1, expected):
            raise ValueError(
                f"`attention_mask` has shape {shape}, but its axis {axis} must be "
                f"{what}={expected} (or 1 to broadcast)."
            )
    if (shape[0] is None or sizes[0] is None) and not tf.executing_eagerly():
        rows, batch = tf.shape(attention_mask)[0], tf.shape(queries)[0]
        check = tf.debugging.Assert(
            (rows == 1) | (rows == batch),
            ["`attention_mask`'s axis 0 must be the batch size B (or 1 to broadcast); got",
             rows, "for B =", batch],
        )
        with tf.control_dependencies([check]):
            attention_mask = tf.identity(attention_mask)
    return attention_mask


@keras.saving.register_keras_serializable(package="tfnlp")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention.

    `softmax(Q Kᵀ · scale + M) V` in `num_heads` heads, with query, key, value
    and output projections laid out as in `keras.layers.MultiHeadAttention`
    (kernels `(D, H, key_dim)` and `(H, value_dim, D_out)`), so weights copy
    one to one between the two.

    Masks: `attention_mask` `(B, T, S)` (True = may attend; a size-1 axis
    broadcasts), and the Keras implicit masks of `query` `(B, T)`, `value` and
    `key` `(B, S)` (e.g. from `Embedding(mask_zero=True)`), combined with a
    logical AND exactly as Keras does (`query_mask[:, :, None] &
    value_mask[:, None, :]`). A query row whose every key is masked gets all
    attention weights 0 and an output of exactly 0 (Keras' fused path
    averages the values uniformly instead); its gradients are finite too,
    also under `mixed_float16` when masked scores overflow.

    Cache: for incremental decoding pass `cache` `(B, 2, S_max, H, key_dim)`
    (keys then values, as `tf.zeros` to start) and `cache_update_index`, the
    position of the first new token. The new keys and values are written into
    the cache in place of slots `index .. index + T - 1` and the queries attend
    over all `S_max` slots, so shapes stay static under `tf.function` and XLA.
    The caller masks the unwritten slots with `attention_mask`, e.g.
    `masks.causal_mask(T, S_max, index)`. With `cache_update_index=None` the
    cache is used as it is (cross-attention over an encoder output projected
    once with `compute_key_value_cache`). Caching needs `value_dim == key_dim`.
    With a cache, the implicit masks of `value` and `key` are not used (they
    describe the new tokens, not the cache slots): hide padded slots with
    `attention_mask`. Writing past slot `S_max - 1` is an error (an
    `InvalidArgumentError`; XLA compiles the assertion out, and there the
    tokens past the last slot are dropped).

    Args:
        num_heads: int, number of attention heads `H`.
        key_dim: int, size of each head for query and key.
        value_dim: int, size of each head for value; defaults to `key_dim`.
        output_dim: int, size of the output; defaults to the query's last
            dimension.
        dropout: float in [0, 1), dropout rate on the attention weights.
        use_bias: bool, whether the projections have biases.
        scale: float, the factor applied to `Q Kᵀ`; defaults to
            `1 / sqrt(key_dim)`.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: tensor `(B, T, D_q)`.
        value: tensor `(B, S, D_v)`.
        key: optional tensor `(B, S, D_k)`; defaults to `value`.
        query_mask, value_mask, key_mask: optional `(B, T)` / `(B, S)` masks.
            Keras fills them from the inputs' implicit masks; pass them only
            to override.
        attention_mask: optional bool or int tensor `(B, T, S)`.
        cache: optional tensor `(B, 2, S_max, H, key_dim)`, see above.
        cache_update_index: optional int or scalar int tensor, see above.
        return_attention_scores: bool, also return the attention weights.
        training: bool, whether dropout is active.

    Returns:
        `output` `(B, T, D_out)`; `(output, weights)` with
        `return_attention_scores=True`, weights `(B, H, T, S)`;
        `(output, updated_cache)` when `cache` is given.

    Example:

    >>> x = keras.ops.ones((2, 6, 16))
    >>> mha = MultiHeadAttention(num_heads=4, key_dim=4)
    >>> mha(x, x).shape
    TensorShape([2, 6, 16])
    >>> causal = tfnlp.layers.masks.causal_mask(6)[None]  # (1, T, S)
    >>> mha(x, x, attention_mask=causal).shape
    TensorShape([2, 6, 16])

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.2.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        output_dim=None,
        dropout=0.0,
        use_bias=True,
        scale=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = _checks.positive_int("num_heads", num_heads)
        self.key_dim = _checks.positive_int("key_dim", key_dim)
        self.value_dim = _checks.positive_int("value_dim", value_dim, allow_none=True)
        self.output_dim = _checks.positive_int("output_dim", output_dim, allow_none=True)
        self.dropout = _checks.rate("dropout", dropout)
        self.use_bias = bool(use_bias)
        self.scale = _checks.positive_float("scale", scale, allow_none=True)
        self.kernel_initializer = _checks.initializer("kernel_initializer", kernel_initializer)
        self.bias_initializer = _checks.initializer("bias_initializer", bias_initializer)
        self.supports_masking = True  # the output carries the query's mask

    @property
    def _value_dim(self):
        return self.value_dim or self.key_dim

    @property
    def _scale(self):
        return self.scale if self.scale is not None else 1.0 / math.sqrt(self.key_dim)

    def _projection(self, name, head_dim):
        return keras.layers.EinsumDense(
            "btd,dnh->btnh",
            output_shape=(None, self.num_heads, head_dim),
            bias_axes="nh" if self.use_bias else None,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, query_shape, value_shape, key_shape=None):
        query_size = _checks.last_dim("query", query_shape)
        value_size = _checks.last_dim("value", value_shape)
        key_size = value_size if key_shape is None else _checks.last_dim("key", key_shape)
        self._input_sizes = {"Q": query_size, "V": value_size, "K": key_size}  # checked per call
        self._query_dense = self._projection("query", self.key_dim)
        self._query_dense.build((None, None, query_size))
        self._key_dense = self._projection("key", self.key_dim)
        self._key_dense.build((None, None, key_size))
        self._value_dense = self._projection("value", self._value_dim)
        self._value_dense.build((None, None, value_size))
        self._output_dense = keras.layers.EinsumDense(
            "btnh,nhd->btd",
            output_shape=(None, self.output_dim or query_size),
            bias_axes="d" if self.use_bias else None,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="attention_output",
        )
        self._output_dense.build((None, None, self.num_heads, self._value_dim))
        self._dropout_layer = Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def compute_key_value_cache(self, value, key=None):
        """Projects `key`/`value` once into a `(B, 2, S, H, key_dim)` cache.

        Pass the result as `cache` with `cache_update_index=None` to attend
        over a fixed sequence (e.g. an encoder output) at every decoding step
        without projecting it again.
        """
        if not self.built:
            raise ValueError(
                "Call the layer once (or build it) before `compute_key_value_cache`: "
                "its projections do not exist yet."
            )
        self._check_cacheable()
        return self._project_key_value(value, value if key is None else key)

    def _project_key_value(self, value, key):
        """Keys and values stacked as a cache: `(B, 2, S, H, key_dim)`."""
        return tf.stack(
            [_project_heads(self._key_dense, key), _project_heads(self._value_dense, value)], axis=1
        )

    def _check_cacheable(self):
        if self._value_dim != self.key_dim:
            raise ValueError(
                "A key/value cache needs `value_dim == key_dim`, got "
                f"value_dim={self._value_dim}, key_dim={self.key_dim}."
            )

    @_checks.errors_without_input_dump()
    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        cache=None,
        cache_update_index=None,
        return_attention_scores=False,
        training=None,
    ):
        if cache is not None and return_attention_scores:
            raise ValueError(
                "`return_attention_scores=True` is not supported together with "
                "`cache`; call without the cache to inspect attention weights."
            )
        # A cross-attention cache replaces `value` and `key` (they go unused).
        uses_inputs = cache is None or cache_update_index is not None
        _checks.tensors(
            ("query", query, "BTQ", "number"),
            ("value", value if uses_inputs else None, "BSV", "number"),
            ("key", key if uses_inputs else None, "BSK", "number"),
            ("cache", cache, "BCMHD", "number"),
            ranks_known=True,  # the head projections need them
            C=(2, "keys and values"), H=(self.num_heads, "`num_heads`"),
            D=(self.key_dim, "`key_dim`"), **self._input_sizes,
        )
        if query_mask is None:
            query_mask = keras_mask(query)
        if value_mask is None:
            value_mask = keras_mask(value)
        if key is None:
            key = value
        elif key_mask is None:
            key_mask = keras_mask(key)
        query, key, value = (without_keras_mask(x) for x in (query, key, value))
        if cache is not None:
            value_mask = key_mask = None

        query_proj = _project_heads(self._query_dense, query)  # (B, T, H, K)
        if cache is None:
            key_proj = _project_heads(self._key_dense, key)  # (B, S, H, K)
            value_proj = _project_heads(self._value_dense, value)  # (B, S, H, V)
        else:
            self._check_cacheable()
            if cache.shape.rank is not None and cache.shape.rank != 5:
                raise ValueError(
                    "`cache` must have shape (B, 2, S_max, num_heads, key_dim), "
                    f"got {cache.shape}."
                )
            if cache_update_index is not None:
                _check_cache_room(cache_update_index, query.shape[1], cache.shape[2])
                cache = _update_positions(cache, self._project_key_value(value, key), cache_update_index)
            key_proj, value_proj = cache[:, 0], cache[:, 1]

        if attention_mask is not None:
            attention_mask = check_attention_mask(attention_mask, query, key_proj.shape[1])
        mask = masks_lib.combine_masks(
            attention_mask,
            None if query_mask is None else tf.expand_dims(query_mask, -1),
            None if value_mask is None else tf.expand_dims(value_mask, -2),
            None if key_mask is None else tf.expand_dims(key_mask, -2),
        )

        query_proj = query_proj * tf.cast(self._scale, query_proj.dtype)
        # Head-major copies and plain batched matmuls: on CPU faster (forward +
        # backward) than the equivalent einsums, which transpose inside every
        # call and in their gradients (benchmarks/README.md, attention).
        scores = tf.matmul(_heads_first(query_proj), _heads_first(key_proj), transpose_b=True)
        # Softmax in float32: bfloat16/float16 lose too much in exp and sum.
        scores = tf.cast(scores, tf.float32)
        if mask is not None:
            mask = mask[:, None, :, :]  # (B, 1, T, S)
        keep = keep_scale = None
        if training and self.dropout > 0:
            keep, keep_scale = self._dropout_layer._keep_mask(tf.shape(scores))
        if return_attention_scores:  # the weights may be differentiated too
            _, weights, dropped = _softmax_and_dropout(
                scores, mask, keep, keep_scale, self.compute_dtype
            )
        else:
            dropped = _attention_weights(scores, mask, keep, keep_scale, self.compute_dtype)
        context = tf.matmul(dropped, _heads_first(value_proj))  # (B, H, T, V)
        output = _merge_heads(self._output_dense, context)  # (B, T, D_out)
        if mask is not None:
            # A row with no visible key got uniform weights above; it sees
            # nothing, so its output (and returned weights) are zero.
            has_key = tf.reduce_any(mask, axis=-1, keepdims=True)  # (B, 1, T, 1)
            output = tf.where(has_key[:, 0], output, tf.zeros((), output.dtype))
            if return_attention_scores:
                weights = tf.where(has_key, weights, tf.zeros((), weights.dtype))

        if cache is not None:
            return output, cache
        if return_attention_scores:
            return output, weights
        return output

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "scale": self.scale,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


def _heads_first(projection):
    """`(B, T, H, K)` <-> `(B, H, T, K)` (the permutation is its own inverse)."""
    return tf.transpose(projection, [0, 2, 1, 3])


def _masked(scores, mask):
    """float32 `scores` with the positions where `mask` is False at the lowest float32."""
    if mask is None:
        return scores
    # A select, not an additive bias: a masked float16 score that overflowed
    # to inf must not survive as inf - 1e9 = inf. The lowest float32, not
    # e.g. -1e9: visible scores below -1e9 (reachable in float32 and
    # bfloat16) must still outweigh every masked one.
    return tf.where(mask, scores, tf.float32.min)


def _softmax_and_dropout(scores, mask, keep, scale, dtype):
    """float32 `softmax(masked scores)`, it in `dtype`, and its dropout (if `keep`)."""
    probabilities = tf.nn.softmax(_masked(scores, mask), axis=-1)
    weights = tf.cast(probabilities, dtype)
    dropped = weights if keep is None else apply_keep_mask(weights, keep, scale)
    return probabilities, weights, dropped


def _attention_weights(scores, mask, keep, scale, dtype):
    """`dropout(softmax(masked scores))` in `dtype`, with one written-out gradient.

    Differentiated op by op, the select, the softmax and the dropout take
    seven passes over the `(B, H, T, S)` scores in the backward pass (the
    dropout's select and scale, the softmax gradient's product, sum,
    difference and product, the mask's select). With `D = k p` (`k` = keep
    x scale, or 1 without dropout) the gradient of `sum(u D)` is
    `e - p sum(e)` with `e = u D`: four passes (and a cast under a mixed
    policy), and no select, because `p` is exactly 0 where the mask hides
    a score. (A query row that sees no key gets uniform weights; the layer
    zeroes its output, so its upstream gradient, and with it its gradient
    here, is exactly 0. If float16 values overflow to inf, `0 x inf` makes
    it NaN; op-by-op autodiff was measured NaN there too, through the key
    projection.)
    """

    @tf.custom_gradient
    def forward(scores):
        probabilities, _, dropped = _softmax_and_dropout(scores, mask, keep, scale, dtype)

        def grad(upstream):
            if keep is None:  # e = u p in float32
                weighted = tf.cast(upstream, tf.float32) * probabilities
            else:
                # e = u k p from the output: in float32 exactly; under a mixed
                # policy rounded to its dtype, as op-by-op autodiff rounds u k.
                weighted = tf.cast(upstream * dropped, tf.float32)
            return weighted - probabilities * tf.reduce_sum(weighted, axis=-1, keepdims=True)

        return dropped, grad

    return forward(scores)


# The projections use their EinsumDense layers' weights (so weights, names
# and checkpoints are unchanged) in one 2-D matmul each. Keras' einsum
# "btd,dnh->btnh" runs as a batched matmul that broadcasts the kernel, so
# its kernel gradient is one product per batch element summed afterwards;
# as a 2-D matmul it is a single product (faster: benchmarks/README.md,
# attention_benchmark.py). A quantized layer is called
# instead: its kernel holds integers whose scales only the layer applies.


def _flat_dense(layer, flat, in_size, out_size):
    """`flat` `(N, in_size)` times `layer`'s kernel and bias, both flattened."""
    kernel = tf.reshape(tf.cast(layer.kernel, flat.dtype), [in_size, out_size])
    outputs = tf.matmul(flat, kernel)
    if layer.bias is not None:
        outputs += tf.reshape(tf.cast(layer.bias, outputs.dtype), [out_size])
    return outputs


def _project_heads(layer, inputs):
    """`(B, T, D)` through `layer` ("btd,dnh->btnh") -> `(B, T, H, K)`."""
    if layer.quantization_mode is not None:
        return layer(inputs)  # int8/float8/...: only the layer knows its scales
    inputs = tf.cast(inputs, layer.compute_dtype)  # as calling the layer would
    size, heads, head_dim = layer.kernel.shape
    outputs = _flat_dense(layer, tf.reshape(inputs, [-1, size]), size, heads * head_dim)
    outputs = tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [heads, head_dim]], 0))
    outputs.set_shape(tuple(inputs.shape[:-1]) + (heads, head_dim))
    return outputs


def _merge_heads(layer, context):
    """`(B, H, T, V)` through `layer` ("btnh,nhd->btd") -> `(B, T, D)`."""
    context = _heads_first(context)  # back to (B, T, H, V)
    if layer.quantization_mode is not None:
        return layer(context)
    heads, head_dim, size = layer.kernel.shape
    outputs = _flat_dense(layer, tf.reshape(context, [-1, heads * head_dim]), heads * head_dim, size)
    shape = tf.shape(context)
    outputs = tf.reshape(outputs, [shape[0], shape[1], size])
    outputs.set_shape([context.shape[0], context.shape[1], size])
    return outputs


def _check_cache_room(start_index, new_length, slots):
    """Fails when tokens `start_index .. start_index + new_length - 1` overflow the cache."""
    start_index = _checks.static_index("cache_update_index", start_index)
    if start_index is not None and new_length is not None and slots is not None:
        if start_index + new_length > slots:
            raise ValueError(
                f"`cache_update_index` ({start_index}) + {new_length} new tokens do not fit "
                f"the cache's {slots} slots."
            )


def _update_positions(cache, update, start_index):
    """Writes `update` `(B, 2, T, H, K)` into `cache` `(B, 2, S, H, K)` at slots
    `start_index .. start_index + T - 1` (keys and values in one pass).

    Built from gather + where, which keep static shapes under XLA and are
    stock TensorFlow ops (no XLA-only op), so an exported decoder runs in
    TF Serving.
    """
    slots, new = tf.shape(cache)[2], tf.shape(update)[2]
    start_index = tf.cast(start_index, tf.int32)
    tf.debugging.assert_less_equal(
        start_index + new, slots,
        message="MultiHeadAttention: cache_update_index + new tokens exceed the cache slots",
    )
    tf.debugging.assert_non_negative(
        start_index, message="MultiHeadAttention: `cache_update_index` must be >= 0"
    )
    if update.shape[2] == 0:
        return cache
    if update.shape[2] is None:
        # A length known only at run time (a prompt) may be 0: one padding
        # slot to gather from, which `inside` then leaves out. Decoding steps
        # (one token, known when traced) skip this copy.
        update = tf.pad(update, [[0, 0], [0, 0], [0, 1], [0, 0], [0, 0]])
    offset = tf.range(slots) - start_index  # (S,)
    inside = (offset >= 0) & (offset < new)
    spread = tf.gather(update, tf.clip_by_value(offset, 0, tf.maximum(new - 1, 0)), axis=2)
    inside = tf.reshape(inside, [1, 1, -1, 1, 1])  # spread: (B, 2, S, H, K)
    return tf.where(inside, tf.cast(spread, cache.dtype), cache)
