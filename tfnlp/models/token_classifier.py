"""What tfnlp's taggers share: tag names, an optional CRF, the word-level loss, words in and tags out."""

import logging

import keras
import numpy as np
import tensorflow as tf

from tfnlp import _checks
from tfnlp.data.tagger_preprocessor import TaggerPreprocessor
from tfnlp.data.task_preprocessor import checked_batch_size
from tfnlp.layers.crf import CRF, bio_transitions
from tfnlp.metrics.tagging import TagAccuracy
from tfnlp.models.task import Task
from tfnlp.training.distribute import global_sum
from tfnlp.training.losses import TaggingCrossEntropy

_LOG = logging.getLogger(__name__)


def tagger_size(num_tags, tag_names):
    """`(num_tags, tag_names)` checked and made consistent: either may be given, or both."""
    return _checks.count_and_names(num_tags, tag_names, "num_tags", "tag_names", "tag", minimum=2)


def tagger_arguments(num_tags, tag_names, crf, preprocessor):
    """`(num_tags, tag_names, crf)` checked: the size (`tagger_size`), `crf` a bool, and the tag
    names a tagger that reads words (has a `preprocessor`) needs."""
    num_tags, tag_names = tagger_size(num_tags, tag_names)
    crf = _checks.boolean("crf", crf)
    if preprocessor is not None and tag_names is None:
        raise ValueError("A tagger with a `preprocessor` needs `tag_names` (the tags it reads and "
                         "writes).")
    return num_tags, tag_names, crf


def _iob2_begins(tag_names):
    """`begins[t]`, the id of `B-X` for tag `t` = `I-X` (else `t`) when every tag name is IOB2's
    (`O`, `B-X`, `I-X`) and every `I-X` has its `B-X`; else None (no IOB2 constraints: IOB1
    files, say, whose entities may start with `I-X`)."""
    if tag_names is None or not all(
            name == "O" or (name[:2] in ("B-", "I-") and len(name) > 2) for name in tag_names):
        return None
    begins = [tag_names.index("B-" + name[2:]) if name.startswith("I-") and "B-" + name[2:] in tag_names
              else i for i, name in enumerate(tag_names)]
    if any(name.startswith("I-") and begins[i] == i for i, name in enumerate(tag_names)):
        return None
    return begins


class TokenClassifier(Task):
    """A tagger: word logits `(B, W, num_tags)`, an optional CRF, tag names, words in, tags out.

    Subclasses build the encoder that gives each word a vector and call
    `_head_init(num_tags, tag_names, crf)` before the Functional
    constructor (it builds the CRF) and `_tag_config(...)` after it. What
    they share:

    - **The loss**: the cross-entropy of the words' tags averaged over the
      words of the whole batch (`tfnlp.training.TaggingCrossEntropy`: tag
      `-1`, not a word, skipped; under a `tf.distribute` strategy over
      every replica's words), or, with a CRF, its negative log-likelihood of
      each sentence's tags averaged over the global batch's sentences (the
      model computes it itself: `compile()` takes no `loss`).
    - **IOB2 with a CRF**: when every tag name is `O`, `B-X` or `I-X` and
      every `I-X` has its `B-X`, transitions IOB2 forbids are excluded from
      the path and the likelihood (`tfnlp.layers.bio_transitions`), and a
      training tag that breaks IOB2 is read as seqeval reads it (an `I-X`
      that starts an entity is its `B-X`).
    - **Metrics**: word accuracy (`tfnlp.metrics.TagAccuracy`), of the
      CRF's best path when there is one.
    - **Words in, tags out**: `fit`, `evaluate` and `predict` on sentences
      of words or raw texts through the tagger's `TaggerPreprocessor`
      (`_task_preprocessor`), and `predict_tags`.

    Example (every tagger is one):

    >>> tagger = tfnlp.models.TransformerTokenClassifier(vocabulary_size=20, num_tags=3, hidden_dim=8)
    >>> isinstance(tagger, TokenClassifier), tagger.crf is None
    (True, True)
    """

    def _head_init(self, num_tags, tag_names, crf):
        """Builds the CRF (`crf=True`), before the Functional constructor."""
        self.crf = None
        self._iob2_begins = None
        if crf:  # used by the loss and the decoding, not by the output (the logits)
            begins = _iob2_begins(tag_names)
            self.crf = CRF(num_tags, allowed_transitions=None if begins is None else bio_transitions(tag_names),
                           name="crf")
            self.crf.build((None, None, num_tags))
            self._iob2_begins = begins

    def _tag_config(self, num_tags, tag_names, preprocessor):
        self.num_tags = num_tags
        self.tag_names = tag_names
        self.preprocessor = preprocessor

    def _default_optimizer(self):
        raise NotImplementedError

    def _compile_defaults(self):
        return {
            "optimizer": self._default_optimizer(),
            "loss": None if self.crf else TaggingCrossEntropy(),  # a CRF: its own (`compute_loss`)
            "metrics": [TagAccuracy()],
        }

    def compile(self, optimizer="auto", loss="auto", **kwargs):
        if self.crf is not None and not (loss is None or (isinstance(loss, str) and loss == "auto")):
            raise ValueError(f"This {type(self).__name__} has a CRF, whose negative log-likelihood is "
                             "its loss: compile it without `loss`.")
        super().compile(optimizer=optimizer, loss=loss, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.crf is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        loss = self._crf_loss(y, y_pred, sample_weight)
        return loss + tf.add_n(self.losses) if self.losses else loss

    def _crf_loss(self, y, y_pred, sample_weight):
        # The negative log-likelihood of each sentence's tags (its words: tag >= 0), summed
        # over the batch's sentences (weighted) / the number of sentences of the global batch
        # (every replica's), so that the replicas' losses add up to the one-process loss
        # however the sentences fall between them; an empty batch gives 0.
        y = tf.cast(y, tf.int32)
        tags = self._iob2_repaired(tf.maximum(y, 0))
        nll = -self.crf.log_likelihood(y_pred, tags, padding_mask=y >= 0)
        if sample_weight is not None:
            nll *= tf.reshape(tf.cast(sample_weight, nll.dtype), [-1])
        return tf.math.divide_no_nan(tf.reduce_sum(nll), global_sum(tf.cast(tf.shape(nll)[0], nll.dtype)))

    def _iob2_repaired(self, tags):
        """`tags` `(B, W)` with each `I-X` that IOB2 forbids where it is (first, after `O` or
        after another type) replaced by `B-X`: the entity seqeval reads there."""
        if self._iob2_begins is None:
            return tags
        allowed = tf.constant(self.crf.allowed_transitions["transitions"])
        start = tf.constant(self.crf.allowed_transitions["start"])
        begin = tf.constant(self._iob2_begins, tf.int32)
        before = tf.concat([tf.fill([tf.shape(tags)[0], 1], -1), tags[:, :-1]], axis=1)
        forbidden = tf.where(before < 0, tf.gather(~start, tags),
                             ~tf.gather_nd(allowed, tf.stack([tf.maximum(before, 0), tags], -1)))
        return tf.where(forbidden, tf.gather(begin, tags), tags)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if self.crf is not None:  # the accuracy of the CRF's best path
            y_pred = self.crf(y_pred, padding_mask=tf.cast(y, tf.int32) >= 0)
        return super().compute_metrics(x, y, y_pred, sample_weight)

    # --- Words and texts ---

    def _task_preprocessor(self):
        if self.preprocessor is None:
            return None
        return TaggerPreprocessor(self.preprocessor, self.tag_names, task_name=type(self).__name__)

    def predict_tags(self, x, batch_size=None, verbose=0, untagged=None):
        """The tag name of every word of each sentence (`untagged` for words past the length).

        Args:
            x: sentences as lists of words, a `tf.string` ragged `(B, None)`
                batch, or raw texts (split into the preprocessor's words:
                its `words_of` gives them and their offsets).
            batch_size: int, sentences per batch (default 32).
            verbose: as for `predict` (default 0, silent).
            untagged: the tag of the words past the preprocessor's length:
                None (default), or e.g. `"O"` for entity metrics
                (`tfnlp.metrics.entity_report`).

        Returns:
            A list (one per sentence) of lists of tag names.
        """
        preprocessor = self._task_preprocessor()
        if preprocessor is None:
            raise ValueError(f"This {type(self).__name__} has no `preprocessor` and `tag_names`: "
                             "`predict_tags` reads words.")
        if isinstance(x, (list, tuple)) and not x:
            return []
        words = preprocessor.texts(x)
        if words is None or isinstance(x, tf.data.Dataset):
            raise ValueError("`predict_tags` takes sentences (lists of words) or raw texts in memory.")
        preprocessor.check("predict")
        batch_size = checked_batch_size(batch_size)
        chunk = max(batch_size, preprocessor.chunk_size)
        tags, words_in_all, untagged_words = [], 0, 0
        for start in range(0, int(words.shape[0]), chunk):
            pieces = preprocessor.word_pieces(words[start:start + chunk])  # tokenized once
            counts = pieces.row_lengths().numpy()
            arrays = {name: np.asarray(value) for name, value in preprocessor.packed(pieces).items()}
            logits = keras.Model.predict(self, arrays, batch_size=batch_size, verbose=verbose)
            tagged = np.asarray(preprocessor.tagged_words(arrays))
            for count, row, row_tagged in zip(counts, self._best_tags(logits, tagged), tagged, strict=True):
                kept = int(np.sum(row_tagged))
                tags.append([self.tag_names[t] for t in row[:kept]] + [untagged] * (int(count) - kept))
                words_in_all += int(count)
                untagged_words += int(count) - kept
        if untagged_words:
            _LOG.warning("%d of %d words are past %s and have no tag (%r).", untagged_words,
                         words_in_all, preprocessor.length_description(), untagged)
        return tags

    def _best_tags(self, logits, word_mask):
        """The predicted tag ids `(B, W)` of `logits` `(B, W, num_tags)`: the CRF's best path,
        or each word's own best tag."""
        if self.crf is not None:
            return self.crf(tf.constant(logits), padding_mask=tf.constant(word_mask)).numpy()
        return np.argmax(logits, axis=-1)

