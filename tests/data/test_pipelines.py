import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data, datasets
from tfnlp.data import bert_pretraining


@pytest.fixture(scope="module")
def tokenizer(corpus_vocabulary):
    return data.WordPieceTokenizer(corpus_vocabulary)


def _all(dataset):
    return list(dataset.as_numpy_iterator())


def test_classification_batches_are_static_and_keep_every_label(tokenizer):
    reviews = datasets.load_fine_food_reviews("validation")
    preprocessor = data.BertPreprocessor(tokenizer, 64)
    batches = data.classification_dataset(reviews, preprocessor, batch_size=32)
    inputs_spec, label_spec = batches.element_spec
    assert all(s.shape == (32, 64) and s.dtype == tf.int32 for s in inputs_spec.values())
    assert label_spec.shape == (32,)
    labels = np.concatenate([y for _, y in _all(batches)])
    expected = [y for _, y in datasets.read_fine_food_reviews("validation")]
    np.testing.assert_array_equal(labels, expected[: len(labels)])  # order kept, remainder dropped
    assert len(expected) - len(labels) < 32
    first = next(iter(batches))[0]
    np.testing.assert_array_equal(
        first["token_ids"][0], preprocessor(tf.constant([datasets.read_fine_food_reviews("validation")[0][0]]))["token_ids"][0]
    )


def test_classification_of_text_pairs():
    pairs = tf.data.Dataset.from_tensor_slices(((["good", "bad"], ["food", "taste"]), [1, 0]))
    vocab = list(data.SPECIAL_TOKENS) + ["good", "bad", "food", "taste"]
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 8)
    inputs, labels = next(iter(data.classification_dataset(pairs, preprocessor, batch_size=2)))
    np.testing.assert_array_equal(inputs["token_ids"], [[2, 5, 3, 7, 3, 0, 0, 0], [2, 6, 3, 8, 3, 0, 0, 0]])
    np.testing.assert_array_equal(inputs["segment_ids"][0], [0, 0, 0, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(labels, [1, 0])
    # Labels are class ids: float ones would be truncated, string ones fail when read.
    for labels, dtype in (([0.7, 1.2], "float32"), (["yes", "no"], "string")):
        with pytest.raises(TypeError, match=rf"labels must be integer class ids \(or bool\), got dtype {dtype}"):
            data.classification_dataset(tf.data.Dataset.from_tensor_slices((["a", "b"], labels)), preprocessor)
    booleans = tf.data.Dataset.from_tensor_slices((["good", "bad"], [True, False]))
    _, labels = next(iter(data.classification_dataset(booleans, preprocessor, batch_size=2)))
    np.testing.assert_array_equal(labels, [1, 0])
    with pytest.raises(ValueError, match=r"`dataset` must hold \(text, label\) pairs"):
        data.classification_dataset(tf.data.Dataset.from_tensor_slices(["a", "b"]), preprocessor)
    with pytest.raises(TypeError, match=r"`dataset` must be a tf.data.Dataset of \(text, label\), got list"):
        data.classification_dataset([("good", 1), ("bad", 0)], preprocessor)  # read_fine_food_reviews' form
    for boundaries in ([4.5], [True]):
        with pytest.raises(ValueError, match="`bucket_boundaries` must be increasing ints"):
            data.classification_dataset(pairs, preprocessor, bucket_boundaries=boundaries)


def test_length_bucketing_pads_to_bucket_lengths_and_loses_nothing(tokenizer):
    reviews = datasets.load_fine_food_reviews("validation")
    preprocessor = data.BertPreprocessor(tokenizer, 128)
    bucketed = _all(data.classification_dataset(
        reviews, preprocessor, batch_size=16, bucket_boundaries=[32, 64], drop_remainder=False))
    lengths = {x["token_ids"].shape[1] for x, _ in bucketed}
    assert lengths == {32, 64, 128}
    full = _all(data.classification_dataset(reviews, preprocessor, batch_size=16, drop_remainder=False))

    def rows(batches):
        return sorted(
            tuple(x["token_ids"][i][x["padding_mask"][i] == 1]) + (int(y[i]),)
            for x, y in batches for i in range(len(y))
        )

    assert rows(bucketed) == rows(full)  # same examples, only padded less
    # Padding uses the vocabulary's [PAD] id, whatever it is.
    vocab = ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "[PAD]"]
    texts = tf.data.Dataset.from_tensor_slices((["a", "a a a a a a a a a"], [0, 1]))
    small = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 16)
    for x, _ in _all(data.classification_dataset(texts, small, 2, bucket_boundaries=[4], drop_remainder=False)):
        np.testing.assert_array_equal(x["token_ids"][x["padding_mask"] == 0], 5)
    with pytest.raises(ValueError, match="bucket_boundaries"):
        data.classification_dataset(reviews, preprocessor, bucket_boundaries=[64, 32])


def test_unilm_seq2seq_packing(tokenizer):
    pairs = datasets.load_text_pairs("bible_archaic_modern", "validation")
    batch = next(iter(data.unilm_seq2seq_dataset(pairs, tokenizer, 96, batch_size=8)))
    assert all(v.shape == (8, 96) for v in batch.values())
    texts = datasets.read_text_pairs("bible_archaic_modern", "validation")[:8]
    lengths = [len(tokenizer(tf.constant(s))) + len(tokenizer(tf.constant(t))) for s, t in texts]
    row = next(i for i, n in enumerate(lengths) if n + 3 <= 96)  # one that fits untruncated
    source, target = texts[row]
    ids, segments = batch["token_ids"][row].numpy(), batch["segment_ids"][row].numpy()
    source_ids = tokenizer(tf.constant(source)).numpy()
    target_ids = tokenizer(tf.constant(target)).numpy()
    n, m = len(source_ids), len(target_ids)
    np.testing.assert_array_equal(ids[: n + m + 3], [2, *source_ids, 3, *target_ids, 3])
    np.testing.assert_array_equal(segments[: n + m + 3], [0] * (n + 2) + [1] * (m + 1))


def test_encoder_decoder_targets_are_inputs_shifted(tokenizer):
    pairs = datasets.load_text_pairs("bible_en_es", "validation")
    batch = next(iter(data.encoder_decoder_dataset(pairs, tokenizer, tokenizer, 48, 40, batch_size=16)))
    inputs, labels, mask = batch["decoder_token_ids"], batch["decoder_target_ids"], batch["decoder_padding_mask"]
    assert inputs.shape == labels.shape == (16, 40) and batch["encoder_token_ids"].shape == (16, 48)
    np.testing.assert_array_equal(inputs[:, 0], tokenizer.cls_id)
    for row in range(16):
        n = int(mask[row].numpy().sum())
        np.testing.assert_array_equal(inputs[row, 1:n], labels[row, : n - 1])
        assert labels[row, n - 1] == tokenizer.sep_id
        encoder_length = int(batch["encoder_padding_mask"][row].numpy().sum())
        assert batch["encoder_token_ids"][row, encoder_length - 1] == tokenizer.sep_id
    with pytest.raises(ValueError, match="`target_tokenizer` must be a WordPieceTokenizer, got str"):
        data.encoder_decoder_dataset(pairs, tokenizer, "es_vocab.txt", 48, 40)


def test_tfrecord_round_trip_equals_in_memory_pipeline(tmp_path, tokenizer):
    documents = datasets.load_documents("en_novels", "validation").take(6)
    def pipeline():  # each pass reshuffles, so compare first passes of equal pipelines
        return bert_pretraining.bert_pretraining_dataset(
            documents, tokenizer, 64, max_predictions_per_seq=10, batch_size=8, seed=3)

    paths = data.write_tfrecords(pipeline().unbatch(), str(tmp_path / "pretrain"), num_shards=3)
    in_memory = pipeline()
    assert len(paths) == 3
    (tmp_path / "pretrain-00009-of-00010.tfrecord.tmp").write_bytes(b"half written")  # ignored
    from_files = data.read_tfrecords(str(tmp_path / "pretrain")).batch(8, drop_remainder=True)
    assert from_files.element_spec == in_memory.element_spec
    expected, actual = _all(in_memory), _all(from_files)
    assert len(expected) == len(actual) > 3
    for a, b in zip(expected, actual, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    # Two workers read disjoint shards that together cover everything.
    worker_rows = [
        {tuple(x["token_ids"]) for x in _all(data.read_tfrecords(str(tmp_path / "pretrain"), 2, w))}
        for w in range(2)
    ]
    assert not worker_rows[0] & worker_rows[1]
    assert len(worker_rows[0] | worker_rows[1]) == len({tuple(r) for b in expected for r in b["token_ids"]})


def test_tfrecord_prefixes_rewrites_and_interrupted_rewrites(tmp_path):
    def numbers(values):
        return tf.data.Dataset.from_tensor_slices({"x": tf.constant(values, tf.int64)})

    def read(prefix):
        return [int(e["x"]) for e in data.read_tfrecords(str(tmp_path / prefix))]

    data.write_tfrecords(numbers([1, 2, 3, 4]), str(tmp_path / "train"), num_shards=2)
    data.write_tfrecords(numbers([9, 9]), str(tmp_path / "train-small"), num_shards=2)
    data.write_tfrecords(numbers([5, 6, 7]), str(tmp_path / "a"), num_shards=3)
    data.write_tfrecords(numbers([8, 9]), str(tmp_path / "a"), num_shards=2)  # stale shard 3 stays
    assert read("train") == [1, 2, 3, 4] and read("a") == [8, 9]

    def failing():
        yield {"x": tf.constant(100, tf.int64)}
        raise RuntimeError("crash while writing")

    crashing = tf.data.Dataset.from_generator(failing, output_signature={"x": tf.TensorSpec([], tf.int64)})
    with pytest.raises(Exception, match="crash while writing"):
        data.write_tfrecords(crashing, str(tmp_path / "train"), num_shards=2)
    assert read("train") == [1, 2, 3, 4]  # the previous data is intact
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(ValueError, match="gets no shard"):
        data.read_tfrecords(str(tmp_path / "a"), num_workers=3, worker_index=2)
    with pytest.raises(ValueError, match="`worker_index` must be a non-negative integer, got 0.5"):
        data.read_tfrecords(str(tmp_path / "a"), num_workers=3, worker_index=0.5)
    wide = tf.data.Dataset.from_tensor_slices({"x": tf.constant([1e300], tf.float64)})
    with pytest.raises(ValueError, match="float64"):
        data.write_tfrecords(wide, str(tmp_path / "wide"))


def test_tfrecord_errors(tmp_path):
    with pytest.raises(ValueError, match="spec.json is missing"):
        data.read_tfrecords(str(tmp_path / "nothing"))
    ragged = tf.data.Dataset.range(3).map(lambda i: {"x": tf.range(i)})  # shape (None,)
    with pytest.raises(ValueError, match="fixed shapes"):
        data.write_tfrecords(ragged, str(tmp_path / "bad"))


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_finite_pipelines_know_their_number_of_batches(tokenizer, drop_remainder):
    # Keras reads it before the first epoch; without it every `fit` on them
    # warned "Your input ran out of data; interrupting training".
    reviews = datasets.load_fine_food_reviews("validation")
    pairs = datasets.load_text_pairs("bible_en_es", "validation")
    reviews_count = len(datasets.read_fine_food_reviews("validation"))
    pairs_count = len(datasets.read_text_pairs("bible_en_es", "validation"))
    pipelines = {  # name: (batches, examples)
        "classification": (data.classification_dataset(
            reviews, data.BertPreprocessor(tokenizer, 32), batch_size=32, shuffle_buffer=64,
            drop_remainder=drop_remainder), reviews_count),
        "unilm": (data.unilm_seq2seq_dataset(pairs, tokenizer, 48, batch_size=32,
                                             drop_remainder=drop_remainder), pairs_count),
        "encoder_decoder": (data.encoder_decoder_dataset(
            pairs, tokenizer, tokenizer, 32, 32, batch_size=32, drop_remainder=drop_remainder),
            pairs_count),
    }
    for name, (batches, count) in pipelines.items():
        expected = count // 32 if drop_remainder else -(-count // 32)
        assert int(batches.cardinality()) == expected, name
        assert sum(1 for _ in batches) == expected, name  # and it is true
    # Unknown or infinite counts stay as they are.
    unknown = reviews.filter(lambda text, label: True)
    assert int(data.classification_dataset(
        unknown, data.BertPreprocessor(tokenizer, 32)).cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert int(data.classification_dataset(
        reviews.repeat(), data.BertPreprocessor(tokenizer, 32)).cardinality()) == tf.data.INFINITE_CARDINALITY


def test_fit_on_a_finite_pipeline_does_not_warn_of_running_out(tokenizer, recwarn):
    from tfnlp import models

    pairs = tf.data.Dataset.from_tensor_slices((["good food", "bad taste", "good"] * 11, [1, 0, 1] * 11))
    batches = data.classification_dataset(pairs, data.BertPreprocessor(tokenizer, 8), batch_size=4)
    model = models.TransformerClassifier(tokenizer.vocabulary_size(), num_classes=2, num_layers=1,
                                         num_heads=2, hidden_dim=8, intermediate_dim=16)
    model.compile()
    model.fit(batches, epochs=2, verbose=0)
    assert not [w for w in recwarn if "ran out of data" in str(w.message)]


def test_texts_of_a_rank_known_only_when_run_are_preprocessed():
    vocab = list(data.SPECIAL_TOKENS) + ["good", "bad"]
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 6)
    texts = tf.data.Dataset.from_generator(lambda: iter([["good", "bad"]]),
                                           output_signature=tf.TensorSpec(None, tf.string))
    np.testing.assert_array_equal(next(iter(texts.map(preprocessor)))["token_ids"],
                                  [[2, 5, 3, 0, 0, 0], [2, 6, 3, 0, 0, 0]])


@pytest.mark.parametrize("pipeline", ["bert_pretraining", "elmo", "encoder_decoder", "unilm_finetuning",
                                      "classification"])
def test_map_functions_left_unconverted_give_the_batches_autograph_gives(tokenizer, pipeline, monkeypatch):
    """tfnlp's map functions are marked `do_not_convert` (seconds less per process:
    benchmarks/first_batch_benchmark.py); converted by AutoGraph they give the same batches."""

    def first_batches():
        documents = datasets.load_documents("en_novels", "validation").take(4)
        if pipeline == "bert_pretraining":
            dataset = data.bert_pretraining_dataset(documents, tokenizer, 32, 4, batch_size=4,
                                                    whole_word_masking=True, shuffle_buffer=50)
        elif pipeline == "elmo":
            dataset = data.elmo_dataset(documents, ["<S>", "</S>", "<UNK>", "the", "a"], sequence_length=12,
                                        max_characters=10, batch_size=4)
        elif pipeline == "classification":
            reviews = datasets.load_fine_food_reviews("validation").take(8)
            dataset = data.classification_dataset(reviews, data.BertPreprocessor(tokenizer, 16), batch_size=4,
                                                  bucket_boundaries=[8])
        else:
            pairs = tf.data.Dataset.from_tensor_slices((["In the beginning", "", "x " * 99], ["a", "b c", "d"]))
            if pipeline == "unilm_finetuning":
                dataset = data.unilm_finetuning_dataset(pairs, tokenizer, 16, batch_size=3)
            else:
                dataset = data.encoder_decoder_dataset(pairs, tokenizer, tokenizer, 8, 6, batch_size=3)
        return [tf.nest.map_structure(np.asarray, b) for b in dataset.take(2)]

    from tensorflow.python.autograph.impl import (
        api as autograph_api,  # counts what AutoGraph converts
    )

    entities, convert = [], autograph_api._convert_actual
    monkeypatch.setattr(autograph_api, "_convert_actual",
                        lambda entity, *args: entities.append(entity) or convert(entity, *args))

    def tfnlp_functions():
        return [e for e in entities if getattr(e, "__module__", "").startswith("tfnlp")]

    shipped = first_batches()
    assert not tfnlp_functions()
    monkeypatch.setattr(tf.autograph.experimental, "do_not_convert", lambda func=None: func)
    converted = first_batches()
    assert tfnlp_functions()  # the count sees conversions
    assert shipped and len(shipped) == len(converted)
    for ours, theirs in zip(shipped, converted, strict=True):
        tf.nest.map_structure(np.testing.assert_array_equal, ours, theirs)
