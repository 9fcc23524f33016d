"""The tokenizer and preprocessor inside a SavedModel, loaded without tfnlp."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import tensorflow as tf

from tfnlp import data

TEXTS_A = ["The cat sat on the mat.", "", "春眠不觉晓，处处闻啼鸟。", "x" * 200_000]
TEXTS_B = ["A second text.", "only b", "", "short"]

LOADER = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the ops; tfnlp itself is not imported
    assert "tfnlp" not in sys.modules
    model = tf.saved_model.load(sys.argv[1])
    a, b = json.load(open(sys.argv[2]))
    pairs = model.signatures["pairs"](text_a=tf.constant(a), text_b=tf.constant(b))
    single = model.signatures["single"](text=tf.constant(a[:1]))
    print(json.dumps({
        "pairs": {k: v.numpy().tolist() for k, v in pairs.items()},
        "single": {k: v.numpy().tolist() for k, v in single.items()},
    }))
    """
)


class _Exported(tf.Module):
    def __init__(self, preprocessor):
        super().__init__()
        self.preprocessor = preprocessor

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def single(self, text):
        return self.preprocessor(text)

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                         tf.TensorSpec([None], tf.string, name="text_b")]
    )
    def pairs(self, text_a, text_b):
        return self.preprocessor((text_a, text_b))


def test_preprocessor_saved_model_in_a_fresh_process(tmp_path, corpus_vocabulary):
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(corpus_vocabulary), 32)
    module = _Exported(preprocessor)
    path = str(tmp_path / "preprocessor" / "1")
    tf.saved_model.save(module, path, signatures={"single": module.single, "pairs": module.pairs})
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps([TEXTS_A, TEXTS_B]))
    result = subprocess.run(
        [sys.executable, "-c", LOADER, path, str(inputs)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    expected_pairs = preprocessor((tf.constant(TEXTS_A), tf.constant(TEXTS_B)))
    expected_single = preprocessor(tf.constant(TEXTS_A[:1]))
    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(loaded["pairs"][key], expected_pairs[key])
        np.testing.assert_array_equal(loaded["single"][key], expected_single[key])
