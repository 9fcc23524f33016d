"""Words (or raw text) and their tags to a word-level tagger's inputs: word ids and ELMo's character ids."""

import collections

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.data import _bert_text
from tfnlp.data._tensors import cut_at_character
from tfnlp.data.elmo import BOS, EOS, character_ids
from tfnlp.data.tagger_preprocessor import WordTagging

PAD, UNKNOWN = "<PAD>", "<UNK>"
# The first entries of every word vocabulary: ids 0 (padding), 1 (a word not in it), 2 and 3 (the
# sentence markers ELMo reads around each sentence).
SPECIAL_WORDS = (PAD, UNKNOWN, BOS, EOS)


def build_tagger_vocabulary(sentences, max_size=None, min_count=1, lowercase=True):
    """The word vocabulary of a word-level tagger: `SPECIAL_WORDS`, then words by frequency.

    Args:
        sentences: the training sentences, lists of words (`TaggedData.words`).
        max_size: int or None, the most entries (the special ones included).
        min_count: int, a word seen fewer times is left out (it reads as
            `<UNK>`).
        lowercase: bool, count words lowercased (as the preprocessor looks
            them up with `lowercase=True`).

    Returns:
        A list of `str`: `["<PAD>", "<UNK>", "<S>", "</S>", ...]`, ties in
        first-seen order.

    Example:

    >>> build_tagger_vocabulary([["The", "cat"], ["the", "dog", "."]])
    ['<PAD>', '<UNK>', '<S>', '</S>', 'the', 'cat', 'dog', '.']
    """
    min_count = _checks.positive_int("min_count", min_count)
    max_size = _checks.positive_int("max_size", max_size, allow_none=True)
    if max_size is not None and max_size <= len(SPECIAL_WORDS):
        raise ValueError(f"`max_size` must leave room for a word after the {len(SPECIAL_WORDS)} "
                         f"special entries {list(SPECIAL_WORDS)}, got {max_size}.")
    counts = collections.Counter(word.lower() if lowercase else word
                                 for sentence in sentences for word in sentence)
    words = [w for w, n in counts.most_common() if n >= min_count and w not in SPECIAL_WORDS]
    vocabulary = [*SPECIAL_WORDS, *words]
    return vocabulary[:max_size] if max_size else vocabulary


@keras.saving.register_keras_serializable(package="tfnlp")
class WordTaggerPreprocessor(WordTagging):
    """Sentences of words (or raw texts) to the inputs of a word-level tagger, tags to ids.

    What `tfnlp.models.BiLSTMTokenClassifier` (TagLM and ELMo's taggers, and
    their control without ELMo) reads: each sentence becomes `<S> w_1 ..
    w_n </S>`, padded with `""` to the batch's longest sentence (at most
    `max_words` words; the words after those get no tag), as

    - `word_ids` int32 `(B, T)`: each token's id in `vocabulary` (looked up
      lowercased with `lowercase`; `<UNK>` for a word not in it, 0 for
      padding), `T` = words + 2;
    - `character_ids` int32 `(B, T, max_characters)`: ELMo's character ids
      (`tfnlp.data.character_ids`: UTF-8 bytes between begin- and
      end-of-word markers, as ELMo's biLM was trained on them).

    Tags come out `(B, T - 2)`, word `w`'s tag at `w`, `-1` where there is
    no word. Batches have the length of their longest sentence, so a short
    request or batch costs what its words cost.

    Words come two ways: pre-split (a `tf.string` ragged `(B, None)` batch,
    e.g. a CoNLL file's tokens; each is one word, and an empty word reads as
    `<UNK>`), or raw texts `(B,)`, split as BERT splits words (whitespace,
    punctuation, each CJK character; `words_of` gives each word's offsets
    in the text as given) and each word read as written in the text (case
    and accents kept).

    Args:
        vocabulary: list of `str` starting with `SPECIAL_WORDS`
            (`build_tagger_vocabulary` makes one).
        tag_names: list of `str`, the tags, id order.
        max_words: int, the most words of a sentence that are tagged.
        max_characters: int, characters per word with the two markers
            (ELMo's 50).
        lowercase: bool, look words up lowercased.
        max_input_bytes: int, a raw text is cut to this many bytes first.
        task_name: str, the tagger named in error messages.

    Example:

    >>> vocabulary = build_tagger_vocabulary([["Ada", "wrote"]])
    >>> preprocessor = WordTaggerPreprocessor(vocabulary, ["O", "B-PER"], max_words=8)
    >>> inputs, y, _ = preprocessor(tf.ragged.constant([["Ada", "wrote", "it"], ["ada"]]),
    ...                             tf.ragged.constant([["B-PER", "O", "O"], ["B-PER"]]))
    >>> inputs["word_ids"].numpy().tolist()
    [[2, 4, 5, 1, 3], [2, 4, 3, 0, 0]]
    >>> inputs["character_ids"].shape, y.numpy().tolist()
    (TensorShape([2, 5, 50]), [[1, 0, 0], [1, -1, -1]])
    """

    def __init__(self, vocabulary, tag_names, max_words=128, max_characters=50, lowercase=True,
                 max_input_bytes=100_000, task_name=None):
        super().__init__(tag_names, task_name=task_name)
        if isinstance(vocabulary, (str, bytes)) or not hasattr(vocabulary, "__iter__"):
            raise ValueError(f"`vocabulary` must be a list of words, got {vocabulary!r}.")
        self.vocabulary = [str(word) for word in vocabulary]
        if tuple(self.vocabulary[:len(SPECIAL_WORDS)]) != SPECIAL_WORDS:
            raise ValueError(f"`vocabulary` must start with {list(SPECIAL_WORDS)} (ids 0-3; "
                             "`tfnlp.data.build_tagger_vocabulary` makes one), got "
                             f"{self.vocabulary[:len(SPECIAL_WORDS)]}.")
        if len(set(self.vocabulary)) != len(self.vocabulary):
            duplicate = next(w for w, n in collections.Counter(self.vocabulary).items() if n > 1)
            raise ValueError(f"`vocabulary` holds {duplicate!r} twice.")
        self.max_words = _checks.positive_int("max_words", max_words)
        self.max_characters = _checks.positive_int("max_characters", max_characters)
        if self.max_characters < 3:
            raise ValueError(f"`max_characters` must be at least 3, got {self.max_characters}.")
        self.lowercase = _checks.boolean("lowercase", lowercase)
        self.max_input_bytes = _checks.max_input_bytes(max_input_bytes)
        self._word_table = None  # built when first used

    def word_pieces(self, x):
        """`x` (words `(B, None)` or texts `(B,)`) as words, `tf.string` ragged `(B, W)`."""
        texts, words = self._words_or_texts(x)
        return self.words_of(texts)["word_pieces"] if texts is not None else words

    def packed(self, words):
        """`word_ids` `(B, T)` and `character_ids` `(B, T, C)` of words `(B, W)`, `T` the longest
        sentence's words (at most `max_words`) + 2."""
        words = words[:, :self.max_words]
        # An empty word would read as padding: it is a word, read as one unknown character.
        words = words.with_flat_values(tf.where(words.flat_values == "", "\ufffd", words.flat_values))
        count = words.nrows()
        tokens = tf.concat([tf.fill([count, 1], BOS), words, tf.fill([count, 1], EOS)], axis=1)
        tokens = tokens.to_tensor("")
        looked_up = tf.strings.lower(tokens, encoding="utf-8") if self.lowercase else tokens
        markers = (tokens == BOS) | (tokens == EOS)
        ids = tf.where(markers, tf.where(tokens == BOS, 2, 3), self._table().lookup(looked_up))
        return {"word_ids": tf.where(tokens == "", 0, ids),
                "character_ids": character_ids(tokens, self.max_characters)}

    def tagged_words(self, inputs):
        """Word slots `(B, T - 2)` of packed `inputs` that hold a word."""
        word_ids = tf.convert_to_tensor(inputs["word_ids"])
        words = tf.reduce_sum(tf.cast(word_ids > 0, tf.int32), axis=1) - 2  # without <S> </S>
        return tf.range(tf.shape(word_ids)[1] - 2)[None, :] < words[:, None]

    def words_of(self, texts):
        """BERT's words of raw `texts` `(B,)` as written, and their offsets in each text (bytes
        and code points, as `WordPieceTokenizer.tokenize_words` gives them)."""
        texts = cut_at_character(tf.convert_to_tensor(texts), self.max_input_bytes)
        _, byte_starts, byte_ends, char_starts, char_ends = _bert_text.bert_words_with_offsets(
            texts, False)
        rows = byte_starts.value_rowids()
        words = tf.strings.substr(tf.gather(texts, rows), byte_starts.flat_values,
                                  byte_ends.flat_values - byte_starts.flat_values, unit="BYTE")
        words = tf.strings.unicode_transcode(words, "UTF-8", "UTF-8", errors="replace",
                                             replacement_char=0xFFFD, replace_control_characters=False)
        return {"word_pieces": byte_starts.with_flat_values(words), "byte_starts": byte_starts,
                "byte_ends": byte_ends, "char_starts": char_starts, "char_ends": char_ends}

    def length_description(self):
        return f"the preprocessor's max_words ({self.max_words})"

    def resources(self):
        return [self._table()]

    def _table(self):
        if self._word_table is None:
            with tf.init_scope():  # one table per preprocessor
                self._word_table = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(
                        tf.constant(self.vocabulary[len(SPECIAL_WORDS):]),
                        tf.range(len(SPECIAL_WORDS), len(self.vocabulary), dtype=tf.int32)),
                    default_value=1)
        return self._word_table

    def in_memory(self, count):
        return False  # each batch is as long as its longest sentence: a pipeline

    def get_config(self):
        config = super().get_config()
        config.update({"vocabulary": list(self.vocabulary), "max_words": self.max_words,
                       "max_characters": self.max_characters, "lowercase": self.lowercase,
                       "max_input_bytes": self.max_input_bytes})
        return config
