import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfnlp import data


def test_longest_first_truncation_and_layout():
    packer = data.SegmentPacker(sequence_length=9, start_id=2, end_id=3, pad_id=0)
    a = tf.ragged.constant([[10, 11, 12, 13, 14, 15], [10], [10, 11]])
    b = tf.ragged.constant([[20, 21], [20, 21, 22, 23, 24, 25, 26], [20]])
    packed = packer((a, b))
    np.testing.assert_array_equal(packed["token_ids"], [
        [2, 10, 11, 12, 13, 3, 20, 21, 3],   # the longer A loses tokens
        [2, 10, 3, 20, 21, 22, 23, 24, 3],   # the longer B loses tokens
        [2, 10, 11, 3, 20, 3, 0, 0, 0],      # both fit: padded
    ])
    np.testing.assert_array_equal(packed["segment_ids"][2], [0, 0, 0, 0, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(packed["padding_mask"][2], [1, 1, 1, 1, 1, 1, 0, 0, 0])
    assert all(v.dtype == tf.int32 for v in packed.values())


def test_ties_shorten_the_second_segment_as_bert_does():
    packer = data.SegmentPacker(sequence_length=6, start_id=2, end_id=3)
    packed = packer((tf.ragged.constant([[10, 11, 12]]), tf.ragged.constant([[20, 21, 22]])))
    np.testing.assert_array_equal(packed["token_ids"], [[2, 10, 11, 3, 20, 3]])


@pytest.mark.parametrize("sequence_length", [5, 6, 10, 11])
def test_pairs_are_cut_as_berts_truncate_seq_pair_cuts_them(sequence_length):
    """BERT's shrink-the-longest rule (written out here): every pair of lengths up to
    12, and lengths up to 60x the budget; odd and even budgets down to the smallest."""
    packer = data.SegmentPacker(sequence_length=sequence_length, start_id=2, end_id=3)
    budget = sequence_length - 3
    lengths = [(a, b) for a in range(13) for b in range(13)]
    lengths += [(a, b) for a in (0, 1, 3, 4, 5, 8, 9, 40, 300) for b in (0, 2, 4, 7, 9, 250)]
    a = tf.ragged.constant([list(range(100, 100 + n)) for n, _ in lengths], tf.int32)
    b = tf.ragged.constant([list(range(1000, 1000 + n)) for _, n in lengths], tf.int32)
    token_ids = packer((a, b))["token_ids"].numpy()
    for row, (la, lb) in zip(token_ids, lengths, strict=True):
        while la + lb > budget:  # remove from the longer one; on a tie from B
            if la > lb:
                la -= 1
            else:
                lb -= 1
        expected = [2, *range(100, 100 + la), 3, *range(1000, 1000 + lb), 3]
        np.testing.assert_array_equal(row, expected + [0] * (sequence_length - len(expected)))


@pytest.mark.parametrize("splits", [(tf.int32, tf.int32), (tf.int32, tf.int64), (tf.int64, tf.int32)])
def test_ragged_inputs_with_int32_row_splits_pack_as_int64_ones(splits):
    packer = data.SegmentPacker(sequence_length=8, start_id=2, end_id=3)
    a = [[10, 11, 12, 13, 14], [15]]
    b = [[20, 21, 22], [23, 24, 25, 26, 27, 28]]
    inputs = [tf.ragged.constant(x, tf.int32, row_splits_dtype=d) for x, d in zip((a, b), splits, strict=True)]
    expected = packer([tf.ragged.constant(a, tf.int32), tf.ragged.constant(b, tf.int32)])
    packed = packer(inputs)
    for key in expected:
        np.testing.assert_array_equal(packed[key], expected[key])
    rows = [[2, 10, 11, 12, 3, 20, 21, 3], [2, 15, 3, 23, 24, 25, 26, 3]]
    np.testing.assert_array_equal(packed["token_ids"], rows)
    assert tf.function(packer.combine)(inputs)[0].to_list() == rows
    single = packer(tf.ragged.constant(a, tf.int32, row_splits_dtype=tf.int32))["token_ids"]
    np.testing.assert_array_equal(single, [[2, 10, 11, 12, 13, 14, 3, 0], [2, 15, 3, 0, 0, 0, 0, 0]])


def test_single_segment_and_empty_segment():
    packer = data.SegmentPacker(sequence_length=5, start_id=2, end_id=3)
    packed = packer(tf.ragged.constant([[7, 8, 9, 10, 11, 12], []], dtype=tf.int32))
    np.testing.assert_array_equal(packed["token_ids"], [[2, 7, 8, 9, 3], [2, 3, 0, 0, 0]])


@pytest.mark.parametrize("num_segments", [1, 2])
def test_static_shape_in_graph_with_unknown_batch(num_segments):
    packer = data.SegmentPacker(sequence_length=16, start_id=2, end_id=3)
    spec = tf.RaggedTensorSpec([None, None], tf.int32)
    graph = tf.function(lambda *s: packer(s), input_signature=[spec] * num_segments)
    out = graph.get_concrete_function().structured_outputs
    assert all(v.shape.as_list() == [None, 16] for v in out.values())
    row = tf.ragged.constant([list(range(10, 40))], tf.int32)
    expected = packer([row] * num_segments)
    for key, value in graph(*[row] * num_segments).items():
        np.testing.assert_array_equal(value, expected[key])


def test_bad_arguments():
    with pytest.raises(ValueError, match="sequence_length"):
        data.SegmentPacker(sequence_length=2, start_id=2, end_id=3)
    packer = data.SegmentPacker(sequence_length=8, start_id=2, end_id=3)
    with pytest.raises(ValueError, match="one or two"):
        packer([tf.ragged.constant([[1]])] * 3)


def test_preprocessor_pairs_serialization_and_functional_model(corpus_vocabulary):
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 24)
    a = tf.constant(["The cat sat on the mat.", "", "春眠不觉晓"])
    b = tf.constant(["It was a good day.", "Only the second text.", ""])
    packed = preprocessor((a, b))
    assert all(v.shape == (3, 24) for v in packed.values())
    assert packed["token_ids"][1, 1] == preprocessor.tokenizer.sep_id  # [CLS] [SEP] B [SEP]
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(preprocessor)))
    restored = keras.saving.deserialize_keras_object(config)
    for key, value in restored((a, b)).items():
        np.testing.assert_array_equal(value, packed[key])
    with pytest.raises(ValueError, match="shape \\(B,\\)"):
        preprocessor(tf.constant([["a"]]))


def test_the_preprocessor_reads_a_python_list_of_texts_as_one_batch():
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "food"]
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), 6)
    texts = ["good food", "food", "good"]  # three texts, not three segments
    from_list = preprocessor(texts)
    from_tensor = preprocessor(tf.constant(texts))
    for name in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(from_list[name], from_tensor[name])
    # A pair is a tuple of two batches: two lists, or two tensors.
    pair = preprocessor((["good food"], ["food"]))
    assert pair["token_ids"].numpy().tolist() == [[2, 5, 6, 3, 6, 3]]
