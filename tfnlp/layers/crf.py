"""Linear-chain conditional random field: log-likelihood loss and Viterbi decoding."""

import re

import keras
import numpy as np
import tensorflow as tf

from tfnlp import _checks
from tfnlp.layers import _keras_masks

_CONSTRAINT_SHAPES = {"transitions": 2, "start": 1, "end": 1}  # key: rank, of (N, N) or (N,)
_BIO_TAG = re.compile(r"^([BI])-(.+)$")


def bio_transitions(tag_names):
    """The transitions IOB2 allows between `tag_names`, as `CRF`'s `allowed_transitions`.

    Under IOB2 (every entity starts with `B-X`) an `I-X` may only follow
    `B-X` or `I-X`, so a sequence may not start with `I-X`; `O` and `B-*` may
    follow anything, and any tag may end a sequence.

    Args:
        tag_names: list of str, the tag of each id: `"O"`, `"B-TYPE"` or
            `"I-TYPE"` (types are any non-empty string, e.g. `"B-PER"`).

    Returns:
        dict: `"transitions"`, `(num_tags, num_tags)` nested lists of bools
        (`[from][to]`), and `"start"` / `"end"`, `(num_tags,)` lists of bools
        (which tags may begin / end a sequence).

    Raises:
        ValueError: naming `tag_names[i]` for a name in another format (e.g.
            BIOES's `"S-PER"`, or `"PER"`), or `tag_names` itself when it is
            empty, not a list of strings, or has a name twice.

    Example:

    >>> allowed = bio_transitions(["O", "B-PER", "I-PER"])
    >>> np.array(allowed["transitions"], int)  # [from][to]: O -> I-PER is not allowed
    array([[1, 1, 0],
           [1, 1, 1],
           [1, 1, 1]])
    >>> allowed["start"], allowed["end"]
    ([True, True, False], [True, True, True])
    """
    if isinstance(tag_names, (str, bytes)) or not hasattr(tag_names, "__iter__"):
        raise ValueError(f"`tag_names` must be a list of tag names, got {tag_names!r}.")
    tag_names = list(tag_names)
    if not tag_names:
        raise ValueError("`tag_names` must name at least one tag, got an empty list.")
    parsed = []  # (prefix, type): ("O", None), ("B", "PER"), ("I", "PER")
    for i, name in enumerate(tag_names):
        match = _BIO_TAG.match(name) if isinstance(name, str) else None
        if name == "O":
            parsed.append(("O", None))
        elif match:
            parsed.append(match.groups())
        else:
            raise ValueError(
                f"`tag_names[{i}]` must be 'O', 'B-TYPE' or 'I-TYPE' (IOB2), got {name!r}."
            )
        if tag_names.index(name) != i:
            raise ValueError(f"`tag_names` has {name!r} twice (at {tag_names.index(name)} and {i}).")
    transitions = [
        [prefix != "I" or (before[1] == kind and before[0] in ("B", "I")) for prefix, kind in parsed]
        for before in parsed
    ]
    start = [prefix != "I" for prefix, _ in parsed]
    return {"transitions": transitions, "start": start, "end": [True] * len(parsed)}


def _allowed_transitions(value, num_tags):
    """`allowed_transitions` checked and completed (lists of bools), or None."""
    if value is None:
        return None
    form = (
        "a dict with the keys 'transitions' (num_tags, num_tags), 'start' and 'end' (num_tags,) "
        "of booleans, each optional (default: all allowed), as `bio_transitions` returns"
    )
    if not isinstance(value, dict) or not set(value) <= set(_CONSTRAINT_SHAPES):
        raise ValueError(f"`allowed_transitions` must be {form}; got {value!r}.")
    checked = {}
    for key, rank in _CONSTRAINT_SHAPES.items():
        name, shape = f"`allowed_transitions['{key}']`", (num_tags,) * rank
        entry = value.get(key)
        if entry is None:
            checked[key] = np.ones(shape, bool).tolist()
            continue
        try:
            array = np.asarray(entry)
        except ValueError:  # ragged nested lists
            array = np.asarray(None)
        if array.shape != shape:
            raise ValueError(
                f"{name} must have shape {shape} (`num_tags` is {num_tags}), "
                f"got {np.shape(array) if array.dtype != object else entry!r}."
            )
        if array.dtype != bool and not (array.dtype.kind in "iu" and np.isin(array, (0, 1)).all()):
            raise ValueError(f"{name} must hold booleans (or 0/1), got dtype {array.dtype.name}.")
        checked[key] = array.astype(bool).tolist()
    for key, where in (("start", "begin"), ("end", "end")):
        if not any(checked[key]):
            raise ValueError(f"`allowed_transitions['{key}']` lets no tag {where} a sequence.")
    return checked


def _logsumexp(x, axis):
    """`tf.reduce_logsumexp`, but `-inf` with zero gradients where every entry is `-inf`.

    `tf.reduce_logsumexp` returns `-inf` there too, but its gradient is
    `0 / 0`: a tag that no allowed path reaches would make every gradient NaN.
    """
    peak = tf.reduce_max(x, axis=axis)
    peak = tf.stop_gradient(tf.where(tf.math.is_finite(peak), peak, tf.zeros_like(peak)))
    total = tf.reduce_sum(tf.exp(x - tf.expand_dims(peak, axis)), axis=axis)
    reached = total > 0.0
    safe = tf.math.log(tf.where(reached, total, tf.ones_like(total))) + peak
    return tf.where(reached, safe, tf.fill(tf.shape(safe), -np.inf))


def _time_major(x):
    """`(B, T, ...)` -> `(T, B, ...)`."""
    return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))


@keras.saving.register_keras_serializable(package="tfnlp")
class CRF(keras.layers.Layer):
    """Linear-chain CRF over per-token potentials: Viterbi decoding and log-likelihood.

    The score of tags `y_1..y_n` for emissions `x` `(n, num_tags)` (a
    tagger's logits) is `start[y_1] + Σ_t x[t, y_t] + Σ_t A[y_{t-1}, y_t] +
    end[y_n]`, with `A` the `(num_tags, num_tags)` transition matrix (from
    → to); `p(y | x) = exp(score(y)) / Z(x)`, `Z` the sum over every tag
    sequence (Lafferty et al., 2001; Lample et al., 2016 for NER). `call`
    returns the best sequence (Viterbi); `log_likelihood` is `log p(y | x)`
    (the forward algorithm in log space) and `loss` its negative mean, the
    training loss. They loop over time with `tf.scan` / `tf.foldl`
    (`tf.while_loop`s, no Python loop): they run in graphs, under XLA
    (`jit_compile=True`, as Keras' `fit` compiles by default on a GPU) and in a
    SavedModel, with the batch size and length known only at run time.

    The weights (`transitions`, `start_transitions`, `end_transitions`,
    zeros at first) are float32 and the CRF is computed in float32 whatever
    the dtype policy: bfloat16 potentials are cast up, and float32 ones are
    not rounded to the policy's compute dtype on the way in (`input_dtype`
    is float32), so that close scores decode as they do in float32.

    **Constraints.** `allowed_transitions` removes transitions exactly: a
    disallowed one is given the score `-inf` (by `tf.where`, not a finite
    penalty such as -1e4, which large enough potentials could overcome), so
    Viterbi never returns it, whatever the potentials, and `Z` sums over the
    allowed sequences only. The log-sum-exp is written so that `-inf` scores
    (a tag no allowed path reaches) give zero gradients, never NaN. A gold
    sequence the constraint forbids (a stray `I-X` after `O` in noisy data)
    has log-likelihood `-inf` (an infinite loss; gradients stay finite):
    repair such labels, or build the constraint from what the data shows.

    **Masks.** Padding positions are ignored: their potentials and tags may
    be anything (labels of -100, as Hugging Face pads them, are fine). Real
    tokens need not be a prefix of each row: the CRF runs over a row's real
    positions in order, as if the padding between them were removed, so
    it can be applied directly under a first-WordPiece mask. Without
    `padding_mask` the Keras mask of `potentials` is used, if it has one.
    A row without real tokens (or `T = 0`) decodes to padding only, with
    best score 0, and has log-likelihood 0 (the empty sequence is certain),
    so it adds nothing to the loss.

    **Training** (see the example): keep the layer in the model's graph so
    Keras tracks its weights, and let the model's `compute_loss` call
    `loss` (or `log_likelihood`, to weight the sequences) on the
    potentials.

    Args:
        num_tags: int, number of tags.
        allowed_transitions: optional dict of booleans, `True` where allowed:
            `"transitions"` `(num_tags, num_tags)` (`[from][to]`), `"start"`
            and `"end"` `(num_tags,)` (which tags may begin / end a
            sequence); a key left out allows everything. `bio_transitions`
            builds the IOB2 one.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        potentials: float tensor `(B, T, num_tags)`, the emission scores.
        padding_mask: optional bool/int `(B, T)`, 1 for real tokens.

    Returns:
        int32 `(B, T)`: the best tag sequence, 0 at padding positions.
        `decode` returns it with the best scores `(B,)`.

    Example:

    >>> crf = CRF(3)  # transitions start at zero: the best tag of each token
    >>> potentials = tf.constant([[[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [9.0, 0.0, 0.0]]])
    >>> crf(potentials, padding_mask=tf.constant([[1, 1, 0]]))
    <tf.Tensor: shape=(1, 3), dtype=int32, numpy=array([[0, 1, 0]], dtype=int32)>
    >>> tags = tf.constant([[0, 1, 0]])  # log p = log softmax(2, 0, 0)[0] + log softmax(0, 3, 0)[1]
    >>> round(float(crf.log_likelihood(potentials, tags, tf.constant([[1, 1, 0]]))[0]), 4)
    -0.3345

    A tagger trained with it (a BERT token classifier or a BiLSTM tagger is
    the same, with its own layers before the potentials):

    >>> tag_names = ["O", "B-PER", "I-PER"]
    >>> class Tagger(keras.Model):
    ...     def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    ...         crf = self.get_layer("crf")
    ...         return crf.loss(y_pred["potentials"], y, padding_mask=x["padding_mask"])
    >>> token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    >>> padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
    >>> hidden = keras.layers.Embedding(10, 8)(token_ids)
    >>> potentials = keras.layers.Dense(len(tag_names))(hidden)
    >>> crf = CRF(len(tag_names), allowed_transitions=bio_transitions(tag_names), name="crf")
    >>> outputs = {"potentials": potentials, "tags": crf(potentials, padding_mask=padding_mask)}
    >>> tagger = Tagger({"token_ids": token_ids, "padding_mask": padding_mask}, outputs)
    >>> tagger.compile(optimizer="adam")
    >>> x = {"token_ids": np.array([[3, 4, 5], [6, 7, 0]]),
    ...      "padding_mask": np.array([[1, 1, 1], [1, 1, 0]])}
    >>> y = np.array([[1, 2, 0], [0, 1, -100]])  # padding labels are ignored
    >>> history = tagger.fit(x, y, epochs=2, verbose=0)
    >>> tagger.predict(x, verbose=0)["tags"].shape
    (2, 3)

    References:
        Lafferty, McCallum and Pereira, "Conditional Random Fields:
        Probabilistic Models for Segmenting and Labeling Sequence Data", 2001.
        Lample et al., "Neural Architectures for Named Entity Recognition", 2016.
    """

    def __init__(self, num_tags, allowed_transitions=None, **kwargs):
        super().__init__(**kwargs)
        self.num_tags = _checks.positive_int("num_tags", num_tags)
        self.allowed_transitions = _allowed_transitions(allowed_transitions, self.num_tags)
        self.supports_masking = True  # the tags carry the mask of the potentials

    def build(self, potentials_shape, padding_mask_shape=None):
        for name, shape in (
            ("transitions", (self.num_tags, self.num_tags)),
            ("start_transitions", (self.num_tags,)),
            ("end_transitions", (self.num_tags,)),
        ):
            # float32, never auto-cast: the CRF is computed in float32.
            weight = self.add_weight(
                name=name, shape=shape, initializer="zeros", dtype="float32", autocast=False
            )
            setattr(self, name, weight)
        self.built = True

    @property
    def input_dtype(self):
        # Keras would cast float inputs to the compute dtype (bfloat16 under
        # `mixed_bfloat16`) before `call`; the CRF takes them in float32.
        return "float32"

    def _scores(self):
        """Transition, start and end scores, float32, `-inf` where not allowed."""
        scores = [
            tf.convert_to_tensor(w)
            for w in (self.transitions, self.start_transitions, self.end_transitions)
        ]
        if self.allowed_transitions is None:
            return scores
        return [
            tf.where(tf.constant(self.allowed_transitions[key]), score, -np.inf)
            for key, score in zip(("transitions", "start", "end"), scores, strict=True)
        ]

    def _prepared(self, potentials, padding_mask, tags=None):
        """Checks the inputs and moves each row's real tokens to its front.

        Returns float32 emissions `(B, T', N)`, the prefix mask `(B, T')`, the
        tags `(B, T')` (int32, 0 at padding; None without `tags`), the
        lengths `(B,)` and `position` `(B, T)`, the new index of each original
        position (None without a mask). `T' = max(T, 1)`.
        """
        if padding_mask is None:
            padding_mask = _keras_masks.keras_mask(potentials)
        _checks.tensors(
            ("potentials", potentials, "BTN", "float"),
            ("padding_mask", padding_mask, "BT", "mask"),
            ("tags", tags, "BT", "int"),
            ranks_known=True,
            N=(self.num_tags, "`num_tags`"),
        )
        if not self.built:
            self.build(tuple(potentials.shape))
        emissions = tf.cast(potentials, tf.float32)  # (B, T, N)
        batch_size, steps = tf.shape(emissions)[0], tf.shape(emissions)[1]
        position = None
        if padding_mask is None:
            mask = tf.ones([batch_size, steps], tf.bool)
        else:
            mask = tf.cast(padding_mask, tf.bool)
            if tags is not None:  # only real positions need valid ids
                tags = tf.where(mask, tags, tf.zeros_like(tags))
            count = tf.cast(mask, tf.int32)
            lengths = tf.reduce_sum(count, axis=1, keepdims=True)  # (B, 1)
            # Real tokens to the front, in order; then the padding, in order.
            position = tf.where(
                mask, tf.cumsum(count, axis=1) - 1, lengths + tf.cumsum(1 - count, axis=1) - 1
            )  # (B, T)
            order = tf.argsort(position, axis=1)  # (B, T)
            emissions = tf.gather(emissions, order, batch_dims=1)
            mask = tf.gather(mask, order, batch_dims=1)
            if tags is not None:
                tags = tf.gather(tags, order, batch_dims=1)
        emissions = tf.where(mask[:, :, None], emissions, tf.zeros_like(emissions))
        # At least one step, so that the loops start from something (T = 0).
        extra = tf.maximum(1 - steps, 0)
        emissions = tf.pad(emissions, [[0, 0], [0, extra], [0, 0]])
        mask = tf.pad(mask, [[0, 0], [0, extra]])
        if tags is not None:
            tags = _checks.ids_in_range("tags", tags, self.num_tags, "`num_tags`")
            tags = tf.pad(tf.cast(tags, tf.int32), [[0, 0], [0, extra]])
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
        return emissions, mask, tags, lengths, position

    @_checks.errors_without_input_dump()
    def call(self, potentials, padding_mask=None):
        return self.decode(potentials, padding_mask)[0]

    def decode(self, potentials, padding_mask=None):
        """Viterbi decoding: the best tag sequence and its score.

        Args:
            potentials: float `(B, T, num_tags)`.
            padding_mask: optional bool/int `(B, T)`, 1 for real tokens.

        Returns:
            `(tags, scores)`: int32 `(B, T)`, 0 at padding positions, and
            float32 `(B,)`, the score of each best sequence (0 for a row
            without real tokens).
        """
        potentials = tf.convert_to_tensor(potentials)
        emissions, mask, _, lengths, position = self._prepared(potentials, padding_mask)
        transitions, start, end = self._scores()
        batch_size = tf.shape(emissions)[0]
        identity = tf.tile(tf.range(self.num_tags)[None], [batch_size, 1])  # (B, N)

        def step(carry, inputs):
            alpha, _ = carry
            emission, real = inputs  # (B, N), (B,)
            scores = alpha[:, :, None] + transitions  # (B, N from, N to)
            best = tf.reduce_max(scores, axis=1) + emission
            backpointer = tf.argmax(scores, axis=1, output_type=tf.int32)
            real = real[:, None]
            # Past the end of a row: carry the scores, point each tag to itself.
            return tf.where(real, best, alpha), tf.where(real, backpointer, identity)

        alpha = start + emissions[:, 0]  # (B, N)
        alphas, backpointers = tf.scan(
            step,
            (_time_major(emissions[:, 1:]), _time_major(mask[:, 1:])),
            initializer=(alpha, identity),
        )  # (T' - 1, B, N) each
        final = tf.concat([alpha[None], alphas], axis=0)[-1] + end  # (B, N)
        last = tf.argmax(final, axis=1, output_type=tf.int32)  # (B,)
        scores = tf.reduce_max(final, axis=1)

        def back(tag, backpointer):
            return tf.gather(backpointer, tag, batch_dims=1)

        earlier = tf.scan(back, backpointers, initializer=last, reverse=True)  # (T' - 1, B)
        tags = tf.transpose(tf.concat([earlier, last[None]], axis=0))  # (B, T')
        tags = tf.where(mask, tags, tf.zeros_like(tags))
        steps = tf.shape(potentials)[1]
        if position is None:
            tags = tags[:, :steps]
        else:
            tags = tf.gather(tags, position, batch_dims=1)  # back to the original positions
        tags = tf.ensure_shape(tags, potentials.shape[:2])
        return tags, tf.where(lengths > 0, scores, tf.zeros_like(scores))

    def log_likelihood(self, potentials, tags, padding_mask=None):
        """`log p(tags | potentials)` of each sequence, float32 `(B,)`.

        Args:
            potentials: float `(B, T, num_tags)`.
            tags: int `(B, T)`, ids in `[0, num_tags)` at real positions
                (anything at padding positions).
            padding_mask: optional bool/int `(B, T)`, 1 for real tokens.

        Returns:
            float32 `(B,)`: 0 for a row without real tokens, `-inf` for
            tags that `allowed_transitions` forbids.
        """
        tags = tf.convert_to_tensor(tags)
        emissions, mask, tags, lengths, _ = self._prepared(potentials, padding_mask, tags)
        transitions, start, end = self._scores()

        def step(alpha, inputs):
            emission, real = inputs  # (B, N), (B,)
            scores = _logsumexp(alpha[:, :, None] + transitions, axis=1) + emission
            return tf.where(real[:, None], scores, alpha)

        alpha = tf.foldl(
            step,
            (_time_major(emissions[:, 1:]), _time_major(mask[:, 1:])),
            initializer=start + emissions[:, 0],
        )  # (B, N)
        log_partition = _logsumexp(alpha + end, axis=1)  # (B,)

        # The score of `tags`. tf.where, never a product with the mask: a
        # disallowed transition at a padding position is -inf, and -inf * 0 is NaN.
        zeros = tf.zeros(tf.shape(tags), tf.float32)
        emitted = tf.where(mask, tf.gather(emissions, tags, batch_dims=2), zeros)
        pairs = tf.stack([tags[:, :-1], tags[:, 1:]], axis=-1)  # (B, T' - 1, 2)
        moved = tf.where(mask[:, 1:], tf.gather_nd(transitions, pairs), zeros[:, 1:])
        last = tf.gather(tags, tf.maximum(lengths - 1, 0), batch_dims=1)
        score = (
            tf.gather(start, tags[:, 0])
            + tf.reduce_sum(emitted, axis=1)
            + tf.reduce_sum(moved, axis=1)
            + tf.gather(end, last)
        )
        # A forbidden gold sequence: -inf, not -inf - (-inf) = NaN when nothing is allowed.
        likelihood = tf.where(score > -np.inf, score - log_partition, score)
        return tf.where(lengths > 0, likelihood, tf.zeros_like(likelihood))

    def loss(self, potentials, tags, padding_mask=None):
        """The negative log-likelihood averaged over the batch's sequences, a float32 scalar.

        Args: as `log_likelihood`'s.
        """
        return -tf.reduce_mean(self.log_likelihood(potentials, tags, padding_mask))

    def compute_output_spec(self, potentials, padding_mask=None):
        return keras.KerasTensor(tuple(potentials.shape[:2]), "int32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_tags": self.num_tags, "allowed_transitions": self.allowed_transitions}
        )
        return config
