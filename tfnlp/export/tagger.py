"""Tagger -> SavedModel that takes raw text (or words) and returns words, tags and entity spans."""

import tensorflow as tf

from tfnlp.data.entity_chunks import entity_chunks, entity_type_names, is_entity_tag_set
from tfnlp.data.tagger_preprocessor import IGNORED, TaggerPreprocessor
from tfnlp.data.word_tagger_preprocessor import WordTaggerPreprocessor
from tfnlp.export._common import WARMUP_BATCH_SIZES, check_preprocessor, preprocessor_for, save
from tfnlp.export._serving_module import TEXT, WORDS, ServingModule, Signature


class TaggerServingModule(ServingModule):
    """Words, their tags and the entities they make, from raw text, in one SavedModel.

    Everything a client would otherwise rebuild in Python outside the model
    (TF Model Garden's and Hugging Face's exports return piece logits) is in
    the graph: splitting the text into words with their character offsets
    in the text as given (`WordPieceTokenizer.tokenize_words`, BERT's
    words: whitespace, punctuation and each CJK character; text without
    spaces between words, such as Chinese, is split per character), the
    first-piece alignment, the tagger (with its CRF's Viterbi path if it has
    one), and the entity spans of IOB2/IOBES tags, chunked exactly as
    seqeval's default mode (`tfnlp.metrics.entity_spans`) chunks them.

    Signatures (any batch size; empty, huge or invalid UTF-8 text gives a
    valid answer: a text with no word has `num_words` 0):

    - `serving_default(text)`: `text` `tf.string (B,)`. Outputs, `W` the
      most words of a text of the batch: `words` `tf.string (B, W)` (as
      written in the text), `word_starts` / `word_ends` int64 `(B, W)`
      (offsets in Unicode code points, Python's `str` indices: a word is
      `text[start:end]`; a text's invalid UTF-8 sequence counts as one code
      point, as in `raw.decode("utf-8", "replace")`), `tags` `tf.string (B,
      W)`, `tag_ids` int32 `(B, W)`, `scores` float32 `(B, W)` (the
      softmax probability of the word's tag among its logits) and
      `num_words` int32 `(B,)`. For an entity tag set, also, `E` the most
      entities of a text: `entity_labels` and `entity_texts` `tf.string
      (B, E)`, `entity_starts` / `entity_ends` int64 `(B, E)` (code
      points, as the words'), `entity_word_starts` / `entity_word_ends`
      int32 `(B, E)` (word indices, end exclusive) and `num_entities` int32
      `(B,)`.
    - `tag_words(words)`: pre-split words, `tf.string (B, W)`, each row's
      words first and `""` after them (each word is tagged as one word,
      whatever BERT's tokenizer does inside it). The same outputs without
      the words and their character offsets; `entity_texts` are the
      entity's words joined by a space (invalid UTF-8 replaced by U+FFFD).

    Padding: words `""`, offsets `-1`, tags `""`, tag ids `-1`, scores 0.
    Words past the preprocessor's length (a BERT tagger's `sequence_length`
    in pieces, with `[CLS]` and `[SEP]`; a word-level tagger's `max_words`)
    get no tag (`""`, `-1`) and are in no entity.

    A word-level tagger (`tfnlp.models.BiLSTMTokenClassifier`, with ELMo or
    without) splits raw text into the same words, reads each as written in
    the text, and pads a request to its longest sentence only.

    Args:
        tagger: a Keras model taking its preprocessor's inputs and
            returning word logits `(B, W, num_tags)` (e.g.
            `tfnlp.models.BertTokenClassifier`); its `crf` attribute, if any
            (a `tfnlp.layers.CRF`), decodes them.
        preprocessor: the `BertPreprocessor` it was trained with, or a
            word-level tagger's `tfnlp.data.WordTaggerPreprocessor`.
        tag_names: list of its tag names, one per tag.
    """

    SIGNATURES = (
        Signature("serving_default", "tag", {"text": TEXT}, method="_serve_text"),
        Signature("tag_words", "tag_words", {"words": WORDS}, method="_serve_words"),
    )

    def __init__(self, tagger, preprocessor, tag_names):
        super().__init__(name="tagger_serving")
        if isinstance(tag_names, (str, bytes)) or not hasattr(tag_names, "__iter__"):
            raise ValueError(f"`tag_names` must be a list of tag names, got {tag_names!r}.")
        tag_names = [str(name) for name in tag_names]
        if isinstance(preprocessor, WordTaggerPreprocessor):  # a word-level tagger's, tag names and all
            if preprocessor.tag_names != tag_names:
                raise ValueError(f"`tag_names` {tag_names} differ from the preprocessor's "
                                 f"{preprocessor.tag_names}.")
            _check_word_preprocessor(preprocessor, tagger)
            self.words = preprocessor
        else:
            check_preprocessor(preprocessor, tagger)
            self.words = TaggerPreprocessor(preprocessor, tag_names, task_name="tagger export")
        num_tags = tagger.outputs[0].shape[-1] if getattr(tagger, "outputs", None) else None
        if num_tags is not None and len(tag_names) != num_tags:
            raise ValueError(f"`tag_names` has {len(tag_names)} names for the tagger's {num_tags} tags.")
        self.tagger = tagger
        self.crf = getattr(tagger, "crf", None)
        self.resources = list(self.words.resources())  # tracked: saved with the module
        self.tag_names = tf.constant(tag_names)
        self.tag_name_list = tag_names
        self.has_entities = is_entity_tag_set(tag_names)
        if self.has_entities:
            self.entity_types = tf.constant(entity_type_names(tag_names))

    def _tagged(self, pieces):
        """`(tag ids, scores)` `(B, W)` for the words' pieces `(B, W, P)`; -1 and 0 past the
        words and past the length."""
        inputs = self.words.packed(pieces)
        logits = tf.cast(self.tagger(inputs, training=False), tf.float32)  # (B, word slots, K)
        tagged = self.words.tagged_words(inputs)
        if self.crf is not None:
            ids = tf.cast(self.crf(logits, padding_mask=tagged), tf.int32)
        else:
            ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
        ids = tf.where(tagged, ids, IGNORED)
        scores = tf.where(tagged, tf.gather(tf.nn.softmax(logits), tf.maximum(ids, 0), batch_dims=2), 0.0)
        # Every word of the batch's longest sentence, the ones past the length untagged.
        width = tf.cast(tf.reduce_max(tf.concat([pieces.row_lengths(), [0]], 0)), tf.int32)
        extra = tf.maximum(width - tf.shape(ids)[1], 0)
        ids = tf.pad(ids, [[0, 0], [0, extra]], constant_values=IGNORED)[:, :width]
        scores = tf.pad(scores, [[0, 0], [0, extra]])[:, :width]
        return ids, scores

    def _common_outputs(self, ids, scores, num_words):
        return {
            "tags": tf.where(ids >= 0, tf.gather(self.tag_names, tf.maximum(ids, 0)), ""),
            "tag_ids": ids,
            "scores": scores,
            "num_words": num_words,
        }

    def _entities(self, ids):
        chunks = entity_chunks(ids, self.tag_name_list)
        present = chunks["types"] >= 0
        return chunks, present, {
            "entity_labels": tf.where(present, tf.gather(self.entity_types, tf.maximum(chunks["types"], 0)), ""),
            "entity_word_starts": chunks["starts"],
            "entity_word_ends": chunks["ends"],
            "num_entities": chunks["counts"],
        }

    def _serve_text(self, text):
        found = self.words.words_of(text)
        ids, scores = self._tagged(found["word_pieces"])
        starts, ends = found["char_starts"], found["char_ends"]
        byte_starts = found["byte_starts"].to_tensor(0)
        byte_ends = found["byte_ends"].to_tensor(0)
        outputs = {
            # Cut by bytes (each word is whole characters): a word costs its own length,
            # not the text's. Invalid UTF-8 inside a span becomes U+FFFD, as Python's
            # "replace" decoding makes it, which the code-point offsets count.
            "words": _spans(text, byte_starts, byte_ends),
            "word_starts": starts.to_tensor(-1),
            "word_ends": ends.to_tensor(-1),
            **self._common_outputs(ids, scores, tf.cast(starts.row_lengths(), tf.int32)),
        }
        if self.has_entities:
            chunks, present, entities = self._entities(ids)
            first = tf.maximum(chunks["starts"], 0)
            last = tf.maximum(chunks["ends"] - 1, 0)

            def at(values, words, padding):
                return tf.where(present, tf.gather(values, words, batch_dims=1), padding)

            outputs.update(
                entities,
                entity_texts=tf.where(present, _spans(text, at(byte_starts, first, 0),
                                                      at(byte_ends, last, 0)), ""),
                entity_starts=at(outputs["word_starts"], first, -1),
                entity_ends=at(outputs["word_ends"], last, -1),
            )
        return outputs

    def _serve_words(self, padded):
        words = tf.RaggedTensor.from_tensor(padded, padding="")
        ids, scores = self._tagged(self.words.word_pieces(words))
        outputs = self._common_outputs(ids, scores, tf.cast(words.row_lengths(), tf.int32))
        if self.has_entities:
            chunks, present, entities = self._entities(ids)
            # Each entity's words, joined by a space.
            shape = tf.shape(chunks["starts"])
            spans = tf.ragged.range(tf.reshape(tf.maximum(chunks["starts"], 0), [-1]),
                                    tf.reshape(tf.maximum(chunks["ends"], 0), [-1]))  # (B * E, None)
            rows = tf.gather(tf.repeat(tf.range(shape[0]), shape[1]), spans.value_rowids())
            entity_words = tf.gather_nd(padded, tf.stack([rows, spans.flat_values], -1))
            texts = tf.reshape(tf.strings.reduce_join(spans.with_flat_values(entity_words), axis=1,
                                                      separator=" "), shape)
            texts = _valid_utf8(texts)  # a word given as invalid UTF-8, as Python decodes it
            outputs.update(entities, entity_texts=tf.where(present, texts, ""))
        return outputs


def _check_word_preprocessor(preprocessor, tagger):
    """Refuses a `WordTaggerPreprocessor` whose ids the word-level `tagger` cannot read."""
    size, characters = getattr(tagger, "vocabulary_size", None), getattr(tagger, "max_characters", None)
    if size is None or characters is None:
        raise ValueError(f"A WordTaggerPreprocessor is for a word-level tagger (BiLSTMTokenClassifier), "
                         f"not a {type(tagger).__name__}.")
    if len(preprocessor.vocabulary) > size:
        raise ValueError(f"`preprocessor`'s vocabulary has {len(preprocessor.vocabulary)} words but the "
                         f"tagger's has only {size}: export with the vocabulary it was trained with.")
    if preprocessor.max_characters != characters:
        raise ValueError(f"`preprocessor`'s max_characters ({preprocessor.max_characters}) must be the "
                         f"tagger's ({characters}).")


def _spans(text, byte_starts, byte_ends):
    """The spans `[start, end)` (bytes, `(B, N)`) of each of the `(B,)` texts, as valid UTF-8."""
    # `substr` broadcasts the `(B, 1)` texts itself, without copying them per span.
    return _valid_utf8(tf.strings.substr(text[:, None], byte_starts,
                                         tf.maximum(byte_ends - byte_starts, 0), unit="BYTE"))


def _valid_utf8(texts):
    """`texts` with each invalid UTF-8 sequence replaced by U+FFFD, as `bytes.decode("utf-8",
    "replace")` replaces it."""
    return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD, replace_control_characters=False)


def export_tagger(model, export_dir, *, preprocessor=None, tag_names=None, version=1,
                  warmup_batch_sizes=WARMUP_BATCH_SIZES):
    """Writes `export_dir/VERSION/` (the layout TF Serving watches): raw text in, tagged words out.

    The SavedModel needs only TensorFlow and tensorflow-text to load
    (`import tensorflow_text` registers its ops); tfnlp is not needed. Its
    signatures and outputs are `TaggerServingModule`'s: `serving_default`
    takes raw text and returns its words, their character offsets, tags,
    scores and (for IOB2/IOBES tags) entity spans with their text and
    offsets; `tag_words` takes pre-split words.

    Args:
        model: a tagger (`tfnlp.models.BertTokenClassifier`,
            `TransformerTokenClassifier`, `BiLSTMTokenClassifier`).
        export_dir: the model's directory, e.g. `saved_models/ner`.
        preprocessor: its `BertPreprocessor` (or `WordTaggerPreprocessor`);
            defaults to the tagger's own.
        tag_names: its tag names; defaults to the tagger's `tag_names`.
        version: int, the version subdirectory.
        warmup_batch_sizes: the batch sizes of the TF Serving warm-up
            requests written for every signature (`()`: none).

    Returns:
        The path of the written version.

    Example:

    >>> from tfnlp import data, models
    >>> import tempfile
    >>> vocab = list(data.SPECIAL_TOKENS) + ["ada", "wrote", "in", "paris"]
    >>> preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 16)
    >>> backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=len(vocab))
    >>> tagger = models.BertTokenClassifier(backbone, tag_names=["O", "B-PER", "B-LOC"],
    ...                                     preprocessor=preprocessor)
    >>> path = export_tagger(tagger, tempfile.mkdtemp(), warmup_batch_sizes=())
    >>> served = tf.saved_model.load(path).signatures["serving_default"]
    >>> outputs = served(text=tf.constant(["Ada wrote in Paris.", ""]))
    >>> outputs["words"][0].numpy().tolist(), outputs["word_starts"][0].numpy().tolist()
    ([b'Ada', b'wrote', b'in', b'Paris', b'.'], [0, 4, 10, 13, 18])
    >>> outputs["num_words"].numpy().tolist()
    [5, 0]
    """
    preprocessor = preprocessor_for(model, preprocessor)
    if tag_names is None:
        tag_names = getattr(model, "tag_names", None) or getattr(preprocessor, "tag_names", None)
    if tag_names is None:
        raise ValueError("`tag_names` is required for a tagger built without them.")
    module = TaggerServingModule(model, preprocessor, tag_names)
    return save(module, export_dir, version, warmup_batch_sizes)
