"""In-graph WordPiece tokenizer: BERT's own text splitting, tensorflow-text's WordPiece."""

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from tfnlp import _checks
from tfnlp.data import _bert_text
from tfnlp.data import vocabulary as vocabulary_lib
from tfnlp.data._preprocessing_layer import PreprocessingLayer
from tfnlp.data._tensors import cut_at_character

NORMALIZATIONS = ("bert", "nfkc")
# BERT's `max_input_chars_per_word` as Hugging Face sets it (Google's code says 200).
MAX_WORD_CHARACTERS = 100


@keras.saving.register_keras_serializable(package="tfnlp")
class WordPieceTokenizer(PreprocessingLayer):
    """Raw text to WordPiece ids, in-graph, exactly as BERT's own tokenizer.

    Text is normalised and split into words as google-research/bert's
    `BasicTokenizer` does — control characters dropped, whitespace and
    punctuation split, every CJK character a word of its own, and, when
    `lower_case`, lower-cased (`str.lower`, final sigma included) with
    accents stripped (NFD, non-spacing marks removed) — then each word into
    its longest-first word pieces (`tensorflow_text.FastWordpieceTokenizer`);
    a word with no spelling in the vocabulary, or longer than 100 characters,
    is one `[UNK]` (Hugging Face's limit; Google's code says 200). The ids
    equal those of Google's `FullTokenizer` and of
    `transformers.BertTokenizer` on the same `vocab.txt`
    (`tests/data/test_bert_tokenizer_parity.py`; docs/data.md lists where
    Hugging Face's tables differ from BERT's). Compatibility characters are
    not folded: full-width `１９９８` and `，` are tokens of their own, as in
    BERT's released vocabularies. Everything runs as TensorFlow ops (no
    lookup-table resource), so it works in `tf.data` and exports in a
    SavedModel.

    `normalization="nfkc"` is tfnlp's earlier normaliser
    (`tensorflow_text.FastBertTokenizer`): uncased, it also folds
    compatibility forms (`１９９８` -> `1998`, `ＧＤＰ` -> `gdp`,
    `…` -> `...`). Use it only with a vocabulary learned that way; tokenizers
    saved before the option existed load with it, so they keep their ids.

    Bad input never fails: bytes that are not valid UTF-8 are dropped, as
    BERT drops U+FFFD (under `"nfkc"` they become `[UNK]`); empty or
    whitespace-only text gives no tokens. Text longer than `max_input_bytes`
    is cut there before anything else is done to it (UTF-8 repair included),
    so the cost of one input is bounded whatever its length; a character
    split by the cut is dropped, so a long text gives exactly the tokens of
    its longest prefix of whole characters that fits.

    `tokenize_words` gives the same ids grouped by word, with each word's
    span in the text as given (byte and character offsets): what taggers,
    readers and their exports use to go back from pieces to the text.

    Args:
        vocabulary: list of tokens, or the path of a `vocab.txt`. It must
            contain `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]` and `[MASK]`.
        lower_case: bool, lower-case and strip accents (uncased BERT).
        max_input_bytes: int, the longest text tokenized, in bytes of the input
            (before invalid UTF-8 is replaced: each bad byte becomes 3); at
            most 2**31 - 1.
        normalization: `"bert"` (BERT's, the default) or `"nfkc"` (see above).
        **kwargs: base layer arguments (`name`, ...).

    Call arguments:
        inputs: `tf.string` tensor of any shape `(...)`, dense or ragged.

    Returns:
        `tf.RaggedTensor` of int32 ids, shape `(..., None)`.

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "猫", "ｃ"]
    >>> tokenizer = WordPieceTokenizer(vocab)
    >>> tokenizer(tf.constant(["The cats", "猫!", "Ｃ"])).to_list()
    [[5, 6, 7], [8, 1], [9]]
    >>> tokenizer.detokenize(tf.constant([[2, 5, 6, 7, 3, 0]])).numpy()
    array([b'the cats'], dtype=object)
    """

    def __init__(self, vocabulary, lower_case=True, max_input_bytes=100_000, normalization="bert", **kwargs):
        super().__init__(**kwargs)
        if isinstance(vocabulary, (str, bytes)):
            vocabulary = vocabulary_lib.load_vocabulary(vocabulary)
        vocabulary = list(vocabulary)
        if not all(isinstance(token, str) for token in vocabulary):
            bad = next(token for token in vocabulary if not isinstance(token, str))
            raise TypeError(f"`vocabulary` must hold strings, got {bad!r}.")
        missing = [t for t in vocabulary_lib.SPECIAL_TOKENS if t not in vocabulary]
        if missing:
            raise ValueError(f"`vocabulary` lacks the special tokens {missing}.")
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("`vocabulary` has duplicated tokens.")
        max_input_bytes = _checks.max_input_bytes(max_input_bytes)
        normalization = _checks.one_of("normalization", normalization, NORMALIZATIONS)
        self.vocabulary = vocabulary
        self.lower_case = bool(lower_case)
        self.max_input_bytes = max_input_bytes
        self.normalization = normalization
        self._index = {token: i for i, token in enumerate(vocabulary)}
        if normalization == "nfkc":
            self._tokenizer = tf_text.FastBertTokenizer(
                vocab=vocabulary,
                token_out_type=tf.int32,
                unknown_token="[UNK]",
                lower_case_nfd_strip_accents=self.lower_case,
                support_detokenization=True,
            )
        else:  # words come split by `_bert_text`; a word of <= 100 characters has <= 400 bytes
            self._tokenizer = tf_text.FastWordpieceTokenizer(
                vocab=vocabulary,
                token_out_type=tf.int32,
                unknown_token="[UNK]",
                no_pretokenization=True,
                max_bytes_per_word=4 * MAX_WORD_CHARACTERS,
                support_detokenization=True,
            )
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            self._index[t] for t in vocabulary_lib.SPECIAL_TOKENS
        )
        self._special_ids = tf.constant(
            [self.pad_id, self.cls_id, self.sep_id, self.mask_id], tf.int32
        )

    def vocabulary_size(self):
        """The number of tokens in the vocabulary."""
        return len(self.vocabulary)

    def get_vocabulary(self):
        """The vocabulary, a list of tokens in id order."""
        return list(self.vocabulary)

    def token_to_id(self, token):
        """The id of `token`; raises `KeyError` naming it when absent."""
        if token not in self._index:
            raise KeyError(f"Token {token!r} is not in the vocabulary.")
        return self._index[token]

    def id_to_token(self, token_id):
        """The token of `token_id`."""
        if not 0 <= token_id < len(self.vocabulary):
            raise IndexError(
                f"`token_id` {token_id} is outside the vocabulary's ids [0, {len(self.vocabulary)})."
            )
        return self.vocabulary[token_id]

    @_checks.errors_without_input_dump()
    def call(self, inputs):
        if isinstance(inputs, tf.RaggedTensor):  # e.g. texts split into pieces
            return inputs.with_flat_values(self.call(inputs.flat_values))
        inputs = tf.convert_to_tensor(inputs)
        if inputs.dtype != tf.string:
            raise TypeError(f"`inputs` must be tf.string, got {inputs.dtype.name}.")
        if inputs.shape.rank is None:
            raise ValueError(f"`inputs` must have a known rank, got shape {inputs.shape}.")
        # Cut first, so that nothing below costs more than `max_input_bytes`.
        text = cut_at_character(inputs, self.max_input_bytes)
        # Broken UTF-8 in the input becomes U+FFFD (which BERT drops); never fail.
        text = tf_text.coerce_to_structurally_valid_utf8(text, replacement_char="\ufffd")
        if text.shape.rank == 0:  # the tokenizers want a batch
            return self._tokenize(text[None])[0]
        if text.shape.rank == 1:
            return self._tokenize(text)
        ids = self._tokenize(tf.reshape(text, [-1]))
        shape = tf.shape(text, out_type=tf.int64)
        for axis in range(text.shape.rank - 1, 0, -1):  # (N, None) -> (d0, ..., dk, None)
            ids = tf.RaggedTensor.from_uniform_row_length(
                ids, shape[axis], nrows=tf.reduce_prod(shape[:axis]), validate=False)  # a 0 inside too
        return ids

    def tokenize_words(self, texts):
        """BERT's words of each text, their WordPiece ids, and where they are in the text.

        The one place where word pieces are mapped back to words and to the
        input string: a tagger's labels, a reader's answer spans and their
        exports all come from here. Words are BERT's (split at whitespace,
        around punctuation and around every CJK character), their ids those
        of `tokenizer(texts)` grouped by word. Each word's span `[start,
        end)` is in the text *as given*, although normalisation changed it:
        `Café`, `Cafe` + U+0301 (the combining mark included), `İstanbul`,
        `ＧＤＰ` and `👍🏽` each span exactly what was written; control and
        zero-width characters between words belong to none, a text's
        invalid UTF-8 bytes are skipped but counted. Every character of a
        word is tracked back to the input character it came from (BERT's
        normalisation never moves one across another); a word spans its
        first to its last such character, then the marks that accent
        stripping removed right after it.

        Offsets come twice: in UTF-8 bytes, for `tf.strings.substr(text, start,
        end - start, unit="BYTE")` in a graph (always exact), and in Unicode
        code points, which are Python's `str` indices (`text[start:end]`,
        or `unit="UTF8_CHAR"` in a graph); in a text with invalid UTF-8 each
        bad sequence counts as one code point, as in
        `raw.decode("utf-8", "replace")`. Text beyond `max_input_bytes` is cut
        first, as in `call`: the words past the cut are absent. In-graph
        (`tf.data`, `tf.function`, SavedModels); `normalization="bert"` only.

        Args:
            texts: `tf.string` tensor `(B,)`, or a scalar for one text.

        Returns:
            A dict, `W` words per text: `"token_ids"`, int32 ragged `(B, W,
            None)`, each word's pieces (a word of more than 100 characters:
            one `[UNK]`); `"byte_starts"`, `"byte_ends"`, `"char_starts"`,
            `"char_ends"`, int64 ragged `(B, W)`. For a scalar text: ragged
            `(W, None)` and dense `(W,)`.

        Example:

        >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "cat", "##s", "猫"]
        >>> words = WordPieceTokenizer(vocab).tokenize_words(tf.constant(["Cats\\u200b Café 猫!"]))
        >>> words["token_ids"].to_list()
        [[[6, 7], [5], [8], [1]]]
        >>> words["char_starts"].to_list(), words["char_ends"].to_list()
        ([[0, 6, 11, 12]], [[4, 10, 12, 13]])
        >>> words["byte_starts"].to_list(), words["byte_ends"].to_list()
        ([[0, 8, 14, 17]], [[4, 13, 17, 18]])
        """
        if self.normalization != "bert":
            raise ValueError(
                f'`tokenize_words` needs normalization="bert"; this tokenizer has {self.normalization!r}.')
        texts = tf.convert_to_tensor(texts)
        if texts.dtype != tf.string:
            raise TypeError(f"`texts` must be tf.string, got {texts.dtype.name}.")
        if texts.shape.rank not in (0, 1):
            raise ValueError(f"`texts` must be a scalar or 1-D (B,), got shape {texts.shape}.")
        # The same cut as `call`; invalid UTF-8 is replaced while decoding, keeping byte offsets.
        text = cut_at_character(texts, self.max_input_bytes)
        batch = text[None] if text.shape.rank == 0 else text
        words, byte_starts, byte_ends, char_starts, char_ends = _bert_text.bert_words_with_offsets(
            batch, self.lower_case)
        result = {
            "token_ids": self._tokenizer.tokenize(self._unknown_if_too_long(words)),
            "byte_starts": byte_starts,
            "byte_ends": byte_ends,
            "char_starts": char_starts,
            "char_ends": char_ends,
        }
        return {key: value[0] for key, value in result.items()} if text.shape.rank == 0 else result

    @staticmethod
    def _unknown_if_too_long(words):
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_WORD_CHARACTERS
        return words.with_flat_values(tf.where(too_long, "[UNK]", words.flat_values))

    def _tokenize(self, texts):
        """1-D texts -> ragged `(N, None)` ids."""
        if self.normalization == "nfkc":
            return self._tokenizer.tokenize(texts)
        words = self._unknown_if_too_long(_bert_text.bert_words(texts, self.lower_case))
        return self._tokenizer.tokenize(words).merge_dims(1, 2)

    def detokenize(self, token_ids):
        """Ids `(..., T)` (dense or ragged) back to text `(...)`: `(T,)` gives one text.

        `[PAD]`, `[CLS]`, `[SEP]` and `[MASK]` are left out and word pieces
        are joined (`"cat", "##s"` -> `"cats"`); words are separated by single
        spaces, so punctuation comes out spaced (`"hello , world"`).
        """
        dense = not isinstance(token_ids, tf.RaggedTensor)
        token_ids = tf.convert_to_tensor(token_ids) if dense else token_ids
        _checks.tensors(("token_ids", token_ids, None, "int"))
        rank = token_ids.shape.rank
        if rank is None or rank == 0:
            raise ValueError(
                f"`token_ids` must have a known rank of at least 1, (..., T), got shape {token_ids.shape}."
            )
        if dense and rank == 1:  # one sequence -> one text
            return self.detokenize(token_ids[None])[0]
        if dense:  # every dimension ragged, so that the values are one flat list
            token_ids = tf.RaggedTensor.from_tensor(token_ids, ragged_rank=rank - 1)
        elif token_ids.flat_values.shape.rank != 1:  # uniform inner dimensions
            token_ids = token_ids.with_flat_values(tf.RaggedTensor.from_tensor(
                token_ids.flat_values, ragged_rank=token_ids.flat_values.shape.rank - 1
            ))
        # Compared in int64, so that an int64 id such as 2**32 + 5 is out of
        # range rather than wrapped around to id 5.
        token_ids = tf.cast(token_ids, tf.int64)
        keep = tf.reduce_all(
            tf.not_equal(token_ids.flat_values[:, None], tf.cast(self._special_ids, tf.int64)[None, :]),
            axis=-1,
        )
        kept = tf.ragged.boolean_mask(token_ids, token_ids.with_flat_values(keep))
        # Out-of-range ids (e.g. from an untrained model) become [UNK].
        in_range = (kept.flat_values >= 0) & (kept.flat_values < len(self.vocabulary))
        kept = kept.with_flat_values(
            tf.cast(tf.where(in_range, kept.flat_values, self.unk_id), tf.int32)
        )
        texts = self._tokenizer.detokenize(kept)
        return texts.to_tensor() if dense and isinstance(texts, tf.RaggedTensor) else texts

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary": self.vocabulary,
                "lower_case": self.lower_case,
                "max_input_bytes": self.max_input_bytes,
                "normalization": self.normalization,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        # Saved before `normalization` existed: tokenize as it was trained.
        return cls(**{"normalization": "nfkc", **config})
