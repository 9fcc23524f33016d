"""Words (or raw text) and their tags to a BERT tagger's inputs: each word's tag on its first piece."""

import keras
import numpy as np
import tensorflow as tf

from tfnlp.data.bert_preprocessor import BertPreprocessor
from tfnlp.data.task_preprocessor import (
    DEFAULT_BATCH_SIZE,
    TaskPreprocessor,
    TextElement,
    packed,
    preprocessing_object,
    serialized,
)

IGNORED = -1  # the tag id of a position that is not a word (padding, a word cut by the length)


class WordTagging(TaskPreprocessor):
    """What the preprocessors of taggers share: sentences of words (or texts) and tags in.

    A subclass turns words into the model's inputs (`word_pieces`,
    `packed`) and says which word slots of a packed batch hold a tagged word
    (`tagged_words`); this base reads the words, texts and tags, maps tag
    names to ids in the graph, checks them, and builds the `tf.data`
    pipelines. Tags come out as int32 `(B, W)`, `W` the batch's word slots,
    with `-1` (`IGNORED`) where there is no tagged word.

    Args:
        tag_names: list of `str`, the tags, id order.
        task_name: str, the tagger named in error messages.
    """

    default_task_name = "tagger"
    text_name = "words"
    label_name = "the tags"
    element_name = "(words, tags)"

    def __init__(self, tag_names, task_name=None):
        super().__init__(task_name=task_name)
        if isinstance(tag_names, (str, bytes)) or not hasattr(tag_names, "__iter__"):
            raise ValueError(f"`tag_names` must be a list of tag names, got {tag_names!r}.")
        self.tag_names = [str(name) for name in tag_names]
        if len(self.tag_names) < 2 or len(set(self.tag_names)) != len(self.tag_names):
            raise ValueError(f"`tag_names` must name at least 2 distinct tags, got {self.tag_names}.")
        self._tag_table = None  # built when tag names are first read (`_tag_ids`)

    # --- What a subclass defines ---

    def word_pieces(self, x):
        """`x` (words `(B, None)` or texts `(B,)`) as what `packed` reads, ragged `(B, W, ...)`."""
        raise NotImplementedError

    def packed(self, pieces):
        """The model's inputs for a batch of `word_pieces`."""
        raise NotImplementedError

    def tagged_words(self, inputs):
        """Which word slots of packed `inputs` hold a tagged word, bool `(B, W)`."""
        raise NotImplementedError

    def words_of(self, texts):
        """The words of raw `texts` `(B,)`: a dict with `"word_pieces"` (for `packed`) and their
        offsets in the text, `"byte_starts"`, `"byte_ends"`, `"char_starts"`, `"char_ends"`
        (int64 ragged `(B, W)`)."""
        raise NotImplementedError

    def length_description(self):
        """What cuts a sentence, for messages."""
        raise NotImplementedError

    def resources(self):
        """The TensorFlow objects (lookup tables) its words path reads, for an export to track."""
        return []

    # --- Shared ---

    def _words_or_texts(self, x):
        """`x` checked: `(texts (B,), None)` for raw texts, `(None, words)` for sentences of
        words (ragged `(B, None)`)."""
        x = x if isinstance(x, tf.RaggedTensor) else tf.convert_to_tensor(x)
        if x.dtype != tf.string:
            raise TypeError(f"The {self.task_name}'s words must be tf.string, got {x.dtype.name}.")
        if x.shape.rank == 1 and not isinstance(x, tf.RaggedTensor):  # raw texts
            return x, None
        if x.shape.rank != 2:
            raise ValueError(
                f"The {self.task_name} takes words `(B, None)` (a ragged batch of sentences) or "
                f"texts `(B,)`, got shape {x.shape}.")
        return None, x if isinstance(x, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(x)

    def call(self, x, y=None, sample_weight=None):
        self.check("predict")
        pieces = self.word_pieces(x)
        inputs = self.packed(pieces)
        if y is not None:
            tagged = self.tagged_words(inputs)
            width = tagged.shape[1]
            y = self._tag_ids(y, pieces)
            y = y.to_tensor(IGNORED, shape=[None, width] if width is not None else tf.shape(tagged))
            y = tf.where(tagged, y, IGNORED)
        return inputs, y, sample_weight

    def _tag_ids(self, y, pieces):
        """`y` (ragged ids or names, one per word of `pieces`) as ragged int32 ids, checked when read."""
        if not isinstance(y, tf.RaggedTensor):
            y = tf.convert_to_tensor(y)
            y = tf.RaggedTensor.from_tensor(y) if y.shape.rank == 2 else y
        if not isinstance(y, tf.RaggedTensor) or y.shape.rank != 2:
            raise ValueError(f"The tags must be a batch of sentences `(B, None)`, got shape {y.shape}.")
        checks = [tf.debugging.assert_equal(
            y.row_lengths(), tf.cast(pieces.row_lengths(), y.row_splits.dtype),
            message="every sentence must have one tag per word (`y`)")]
        if y.dtype == tf.string:
            if self._tag_table is None:
                with tf.init_scope():  # one table per preprocessor: TensorFlow keeps them all
                    self._tag_table = tf.lookup.StaticHashTable(
                        tf.lookup.KeyValueTensorInitializer(
                            tf.constant(self.tag_names), tf.range(len(self.tag_names), dtype=tf.int64)),
                        default_value=-1)
            y = y.with_flat_values(self._tag_table.lookup(y.flat_values))
            checks.append(tf.debugging.assert_non_negative(
                y.flat_values, message=f"a tag is not one of the tagger's `tag_names` {self.tag_names}"))
        elif not y.dtype.is_integer:
            raise TypeError(f"The tags must be tag ids (integers) or tag names, got {y.dtype.name}.")
        flat = tf.cast(y.flat_values, tf.int64)
        checks.append(tf.debugging.assert_less(
            tf.reduce_max(tf.concat([flat, [0]], 0)), tf.constant(len(self.tag_names), tf.int64),
            message=f"tag ids must be in [0, {len(self.tag_names)}) (`tag_names`)"))
        checks.append(tf.debugging.assert_non_negative(flat, message="tag ids must not be negative"))
        with tf.control_dependencies(checks):
            return y.with_flat_values(tf.cast(y.flat_values, tf.int32))

    def check(self, mode, pairs=False):
        if pairs:
            raise ValueError(f"The {self.task_name} tags single sentences, not text pairs.")

    def texts(self, x, name="x"):
        """Words (a list of lists of `str`, or a `tf.string` ragged `(B, None)`) or texts, or None."""
        if isinstance(x, tf.RaggedTensor):
            return x if x.dtype == tf.string else None
        if isinstance(x, (list, tuple)) and x and all(isinstance(s, (list, tuple)) for s in x):
            for i, sentence in enumerate(x):
                if not sentence:
                    raise ValueError(f"`{name}[{i}]` is an empty sentence: it has no word to tag.")
                for j, word in enumerate(sentence):
                    if not isinstance(word, (str, bytes)):
                        raise TypeError(f"`{name}[{i}][{j}]` must be a str, got {type(word).__name__}.")
            return tf.ragged.constant([[w.encode() if isinstance(w, str) else w for w in s] for s in x],
                                      dtype=tf.string)
        return super().texts(x, name)

    def checked_labels(self, y, count):
        """Tags of `count` sentences in memory: ragged int32 ids, names checked on the host."""
        if isinstance(y, tf.RaggedTensor):
            sentences = y.to_list()
        elif tf.is_tensor(y):
            sentences = y.numpy().tolist()
        else:
            sentences = [list(s) for s in y]
        if len(sentences) != count:
            raise ValueError(f"`y` must hold the tags of each sentence ({count}), got {len(sentences)}.")
        index = {name: i for i, name in enumerate(self.tag_names)}
        ids = []
        for i, tags in enumerate(sentences):
            row = []
            for tag in tags:
                if isinstance(tag, bytes):
                    tag = tag.decode("utf-8", "replace")
                if isinstance(tag, str):
                    if tag not in index:
                        raise ValueError(
                            f"`y[{i}]` holds the tag {tag!r}, which is not among the tagger's "
                            f"`tag_names` {self.tag_names}.")
                    row.append(index[tag])
                elif isinstance(tag, (int, np.integer)) and not isinstance(tag, bool):
                    if not 0 <= tag < len(self.tag_names):
                        raise ValueError(
                            f"`y[{i}]` holds the tag id {tag}, outside [0, {len(self.tag_names)}).")
                    row.append(int(tag))
                else:
                    raise TypeError(f"`y[{i}]` must hold tag names or ids, got {tag!r}.")
            ids.append(row)
        return tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1) if ids else None

    def dataset_element(self, spec, mode):
        """Where a dataset element holds its sentences (see below), as a `TextElement`; None if
        it holds none.

        Sentences come as one sentence's words (a ragged `(W,)` slice of a
        ragged batch, as `TaggedData.as_dataset()` gives) or a ragged batch
        `(B, None)` of them, or as raw texts: one text (a scalar), or a batch
        `(B,)`; each optionally with its tags. A dense `(N,)` string vector
        is one sentence's words when its tags are a vector too, a batch of
        texts when they are a ragged batch; alone (in `predict`) it could be
        either, and is refused.
        """
        labelled = isinstance(spec, tuple) and len(spec) == 2
        features = spec[0] if labelled else spec
        if isinstance(features, tf.RaggedTensorSpec) and features.dtype == tf.string:
            if features.shape.rank not in (1, 2):  # a sentence (sliced from a ragged batch), a batch
                raise ValueError(self._element_error(spec))
            batched = features.shape.rank == 2
        elif isinstance(features, tf.TensorSpec) and features.dtype == tf.string:
            if features.shape.rank not in (0, 1):
                raise ValueError(self._element_error(spec))
            batched = False
            if features.shape.rank == 1:
                if not labelled:
                    raise ValueError(
                        f"A dataset of string vectors {spec} is ambiguous for {self.task_name}: each "
                        "could be one sentence's words or a batch of texts. Give sentences of words "
                        "as ragged batches (`dataset.ragged_batch(32)`) and texts unbatched "
                        "(scalars).")
                tags = spec[1]
                batched = tags.shape.rank == 2  # ragged (B, None) tags: a batch of texts
        else:
            return None  # model inputs (or something Keras will name)
        if mode != "predict" and not labelled:
            raise ValueError(self._element_error(spec))
        return TextElement(features, spec[1] if labelled else None, batched)

    def batches(self, examples, *, batch_size, shuffle, mode, count, batched):
        if count and shuffle and mode == "fit":
            examples = examples.shuffle(count, reshuffle_each_iteration=True)
        if not batched:
            examples = examples.ragged_batch(batch_size or DEFAULT_BATCH_SIZE)
        mapped = tf.autograph.experimental.do_not_convert(
            lambda features, labels=None: packed(*self(features, labels)))
        return examples.map(mapped, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def _element_error(self, spec):
        return (f"A dataset for {self.task_name} must hold sentences: `(words, tags)` with words "
                "a `(W,)` tf.string vector (or a ragged `(B, None)` batch) and tags `(W,)` (or "
                "`(B, None)`); in `predict`, ragged batches of words or raw texts. Got "
                f"{spec}.")

    def get_config(self):
        config = super().get_config()
        config["tag_names"] = list(self.tag_names)
        return config


@keras.saving.register_keras_serializable(package="tfnlp")
class TaggerPreprocessor(WordTagging):
    """A `BertPreprocessor` and the tag names: what a BERT tagger reads words or texts with.

    BERT's recipe (Devlin et al., 2019, section 5.3), as TF Model Garden's
    tagging task applies it: every word is cut into WordPieces, the
    sentence is packed as `[CLS] pieces [SEP]` (truncated and padded to the
    preprocessor's `sequence_length`), and each word is represented by its
    first piece. `word_positions` `(B, sequence_length - 2)` gives, for
    word `w` of each sentence, the position of its first piece in
    `token_ids` (0 after the last word: position 0 is `[CLS]`, never a
    word), so a model reads word-level vectors with one gather and word
    `w`'s tag is `y[:, w]`; positions that are not words get tag id `-1`
    (`IGNORED`), which the tagger's loss and metrics skip. A sentence
    whose pieces do not fit keeps the words whose first piece does: the
    others get no position and no tag (`num_words` counts them all).

    Words come two ways:

    - **Pre-split words** (a CoNLL file's tokens): a `tf.string` ragged
      `(B, None)` batch. Each is one word, whatever BERT's tokenizer does
      inside it (`n't` is 3 BERT words, `1,000` 3: their pieces are all the
      word's); a word with no piece (only control or zero-width characters)
      is one `[UNK]`, so every word has a tag.
    - **Raw texts** (`(B,)` `tf.string`): split into BERT's words
      (`WordPieceTokenizer.tokenize_words`: whitespace, punctuation, each
      CJK character), whose character offsets in the text `words_of` gives.

    Tags are tag ids or, as strings, tag names mapped in the graph; a
    sentence with a different number of tags than words, an unknown tag
    name or an id outside `[0, len(tag_names))` fails when the batch is
    read. Texts and words in memory are preprocessed once into arrays
    while their ids fit in memory (`in_memory`).

    Args:
        preprocessor: a `BertPreprocessor` (or its config): the tokenizer
            and `sequence_length`; None for a tagger that takes model
            inputs only.
        tag_names: list of `str`, the tags, id order.
        task_name: str, the tagger named in error messages.

    Call arguments:
        x: words, `tf.string` ragged `(B, None)`, or texts `(B,)`.
        y: optional tags, ragged `(B, None)` ids or names, one per word.
        sample_weight: optional `(B,)` sentence weights, passed through.

    Returns:
        `(inputs, y, sample_weight)`: a dict of int32 `token_ids`,
        `segment_ids`, `padding_mask` `(B, sequence_length)` and
        `word_positions` `(B, sequence_length - 2)`; int32 tag ids `(B,
        sequence_length - 2)` with `-1` where there is no word (or None);
        the weights (or None).

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ada", "love", "##lace", "wrote"]
    >>> bert = BertPreprocessor(tfnlp.data.WordPieceTokenizer(vocab), sequence_length=7)
    >>> tagger = TaggerPreprocessor(bert, ["O", "B-PER", "I-PER"])
    >>> words = tf.ragged.constant([["Ada", "Lovelace", "wrote"]])
    >>> inputs, y, _ = tagger(words, tf.ragged.constant([["B-PER", "I-PER", "O"]]))
    >>> inputs["token_ids"].numpy().tolist(), inputs["word_positions"].numpy().tolist()
    ([[2, 5, 6, 7, 8, 3, 0]], [[1, 2, 4, 0, 0]])
    >>> y.numpy().tolist()
    [[1, 2, 0, -1, -1]]
    """

    def __init__(self, preprocessor, tag_names, task_name=None):
        super().__init__(tag_names, task_name=task_name)
        self.preprocessor = preprocessing_object("preprocessor", preprocessor, BertPreprocessor)
        if self.preprocessor is not None and self.preprocessor.sequence_length < 3:
            raise ValueError(
                "`preprocessor`'s `sequence_length` must be at least 3 ([CLS], a piece, [SEP]), "
                f"got {self.preprocessor.sequence_length}.")

    @property
    def max_words(self):
        """Words of a sentence that can be tagged: `sequence_length - 2`."""
        return self.preprocessor.sequence_length - 2

    def packed(self, pieces):
        """The model's inputs for words' pieces `(B, W, P)` (`word_pieces`): `[CLS] pieces [SEP]`
        and each word's first-piece position (see the class docstring)."""
        length = self.preprocessor.sequence_length
        counts = tf.cast(pieces.row_lengths(axis=2), tf.int32)  # pieces per word, ragged (B, W)
        starts = tf.math.cumsum(counts, axis=1, exclusive=True) + 1  # after [CLS]
        inputs = self.preprocessor.packer(pieces.merge_dims(1, 2))
        kept = tf.ragged.boolean_mask(starts, starts <= length - 2)
        inputs["word_positions"] = kept.to_tensor(0, shape=[None, length - 2])
        return inputs

    def tagged_words(self, inputs):
        """Which of the `max_words` word slots of packed `inputs` hold a tagged word, bool `(B, W)`."""
        return inputs["word_positions"] > 0

    def length_description(self):
        """What cuts a sentence, for messages."""
        return (f"the preprocessor's sequence_length ({self.preprocessor.sequence_length} pieces with "
                "[CLS] and [SEP])")

    def word_pieces(self, x):
        """`x` (words `(B, None)` or texts `(B,)`) as WordPiece ids ragged `(B, W, P)`, P >= 1."""
        tokenizer = self.preprocessor.tokenizer
        texts, words = self._words_or_texts(x)
        if texts is not None:
            return tokenizer.tokenize_words(texts)["token_ids"]
        pieces = tokenizer(words.flat_values)  # (N, P): every piece of each given word
        empty = tf.cast(pieces.row_lengths() == 0, tf.int64)
        unknown = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(empty)], tf.constant(tokenizer.unk_id, pieces.dtype)), empty)
        return words.with_flat_values(tf.concat([pieces, unknown], axis=1))

    def words_of(self, texts):
        """BERT's words of raw `texts` `(B,)` and their offsets (`WordPieceTokenizer.tokenize_words`;
        `"word_pieces"` is its `"token_ids"`)."""
        found = self.preprocessor.tokenizer.tokenize_words(texts)
        return dict(found, word_pieces=found["token_ids"])

    # --- The text path's hooks ---

    def check(self, mode, pairs=False):
        if self.preprocessor is None:
            raise self._without("`preprocessor`", "`preprocessor=tfnlp.data.BertPreprocessor(...)`",
                                "the preprocessor's output")
        super().check(mode, pairs)

    def in_memory(self, count):
        return count * self.preprocessor.sequence_length <= self.max_in_memory_ids

    def get_config(self):
        config = super().get_config()
        config["preprocessor"] = serialized(self.preprocessor)
        return config
