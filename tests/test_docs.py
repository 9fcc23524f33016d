"""The Python blocks of README.md and docs/ run, in reading order, as one script at tiny sizes.

The pages are written to be read in order: a block uses the names the blocks
before it define (`tokenizer` from the text-data page, `backbone` from the
BERT block, ...). This test runs them so, with the few substitutions below
that shrink corpora, sizes and step counts; each substitution must find its
text, so a page that changes fails here until its tiny version is updated.
The checkpoint importers read small files written by the test in the formats
they document (Hugging Face, bilm-tf, microsoft/unilm).

docs/own_data.md is left out here: tests/test_own_data.py runs it on the
labelled files it writes. The two clients of docs/serving.md (REST with
`requests`, gRPC with TF Serving's stubs) talk to stand-ins for TF Serving's
predict APIs on free ports, a Python SavedModel behind each: they check the
client code, not the server (tests/export/test_tf_serving.py runs the
server's C++ SavedModel loader).
"""

import json
import pathlib
import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the exports' ops)

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/layers.md", "docs/data.md", "docs/bert.md", "docs/transformer.md",
         "docs/unilm.md", "docs/elmo.md", "docs/weights.md", "docs/generation.md",
         "docs/training.md", "docs/serving.md", "docs/tagging.md"]
ELSEWHERE = {"docs/own_data.md"}
CLIENTS = ("localhost:8501", "localhost:8500")  # REST and gRPC ports of TF Serving
TINY_ELMO = (', units=16, projection_dim=8, filters=((1, 8), (2, 8)), num_highway_layers=1, '
             'num_sampled=64)')
# page -> [(text, its tiny version)]: each text must be on the page.
TINY = {
    "README.md": [
        ('datasets.read_fine_food_reviews("train")', 'datasets.read_fine_food_reviews("train")[:48]'),
        ("learn_wordpiece_vocabulary(texts, 8000)", "learn_wordpiece_vocabulary(texts, 400)"),
        ("BertPreprocessor(tokenizer, 128)", "BertPreprocessor(tokenizer, 32)"),
        ("epochs=3)", "epochs=1)"),
    ],
    "docs/data.md": [
        ('load_documents("en_novels", "train")', 'load_documents("en_novels", "train").take(6)'),
        ("(documents, 8000,", "(documents, 400,"),
        ("sequence_length=128,", "sequence_length=32,"),
        ("max_predictions_per_seq=20, batch_size=32", "max_predictions_per_seq=4, batch_size=4"),
    ],
    "docs/bert.md": [
        ('"bert_mini"', '"bert_tiny"'),
        ("steps_per_epoch=1000", "steps_per_epoch=2"),
        ('read_fine_food_reviews("train")', 'read_fine_food_reviews("train")[:32]'),
        ("BertPreprocessor(tokenizer, 128)", "BertPreprocessor(tokenizer, 32)"),
    ],
    "docs/transformer.md": [
        ('read_text_pairs("bible_en_es", "train")', 'read_text_pairs("bible_en_es", "train")[:200]'),
        ("(english, 8000)", "(english, 400)"),
        ("(spanish, 8000)", "(spanish, 400)"),
        ('load_text_pairs("bible_en_es", "train")', 'load_text_pairs("bible_en_es", "train").take(16)'),
        ('load_fine_food_reviews("train")', 'load_fine_food_reviews("train").take(32)'),
        ("BertPreprocessor(tokenizer, 256)", "BertPreprocessor(tokenizer, 32)"),
        ('from_architecture("transformer_small", en_size, es_size)',
         'from_architecture("transformer_small", en_size, es_size, num_encoder_layers=1, num_decoder_layers=1)'),
        ("max_length=48, beam_size=4", "max_length=6, beam_size=2"),
    ],
    "docs/unilm.md": [
        ('load_text_pairs("bible_archaic_modern", "train")',
         'load_text_pairs("bible_archaic_modern", "train").take(12)'),
        (".map(models.unilm_batch))", ".map(models.unilm_batch).take(2))"),
    ],
    "docs/elmo.md": [
        ("for s in d]", "for s in d][:100]"),
        ('dtype="mixed_bfloat16")', 'dtype="mixed_bfloat16"' + TINY_ELMO),
        ("bilm.fit(batches, epochs=3)", "bilm.fit(batches.take(2), epochs=1)"),
    ],
    "docs/weights.md": [
        ('from_architecture("bert_base", vocabulary_size=30522)', 'from_architecture("bert_tiny", vocabulary_size=300)'),
    ],
    "docs/training.md": [
        ('dtype="mixed_bfloat16")', 'dtype="mixed_bfloat16"' + TINY_ELMO),
        ("steps=20_000", "steps=3"),
        ("checkpoint_every=500", "checkpoint_every=2"),
        ("histogram_every=1000", "histogram_every=2"),
    ],
    "docs/tagging.md": [
        ("(texts, 8000)", "(texts[:300], 400)"),
        ("WordPieceTokenizer(vocabulary), 96)", "WordPieceTokenizer(vocabulary), 32)"),
        ("pos_train.words, pos_train.tags, batch_size=32, epochs=3",
         "pos_train.words[:32], pos_train.tags[:32], batch_size=16, epochs=1"),
        ("pos_test.words, pos_test.tags", "pos_test.words[:32], pos_test.tags[:32]"),
        ("ner_train.words, ner_train.tags, batch_size=32, epochs=3",
         "ner_train.words[:32], ner_train.tags[:32], batch_size=16, epochs=1"),
        ("predict_tags(ner_test.words,", "predict_tags(ner_test.words[:32],"),
        ('ELMoBiLM.from_architecture("elmo_small", 1000, num_sampled=None)',
         "ELMoBiLM(50, units=16, projection_dim=8, filters=((1, 8), (2, 8)), num_sampled=None)"),
        ("ner_train.tag_names, max_words=128)", "ner_train.tag_names, max_words=32)"),
        ("ner_test.tags, predicted", "ner_test.tags[:32], predicted"),
    ],
}


def python_blocks(page):
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(encoding="utf-8"), re.S)


def tiny(page, code, used):
    """`code` with the page's substitutions made; `used` collects those that were."""
    for text, small in TINY.get(page, []):
        if text in code:
            code = code.replace(text, small)
            used.add((page, text))
    return code


def write_checkpoints(directory):
    """The files the checkpoint block of docs/weights.md reads, small, in their formats."""
    import torch
    import transformers

    from tests.models import test_bilm_tf_weights, test_unilm_checkpoints

    bert = directory / "bert-base-uncased"
    words = [f"w{i}" for i in range(295)]
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=300, hidden_size=128, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=512)
    transformers.BertModel(config).save_pretrained(bert, safe_serialization=True)
    (bert / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n",
                                    encoding="utf-8")
    test_bilm_tf_weights._write_bilm_tf_files(directory, test_bilm_tf_weights.PROJECTED)
    torch.save(test_unilm_checkpoints._v1_state_dict(), directory / "unilm1-base-cased.bin")
    (directory / "bert_config.json").write_text(json.dumps(test_unilm_checkpoints.CONFIG))


class Served:
    """The highest version of each model under `base` (TF Serving's `model_base_path`), loaded once."""

    def __init__(self, base):
        self.base, self.loaded = base, {}

    def signature(self, model, name):
        version = max(int(p.name) for p in (self.base / model).iterdir() if p.name.isdigit())
        path = str(self.base / model / str(version))
        if path not in self.loaded:
            self.loaded[path] = tf.saved_model.load(path)
        return self.loaded[path].signatures[name or "serving_default"]


def grpc_stand_in(served):
    """TF Serving's PredictionService.Predict on a free port: (server, port)."""
    from concurrent import futures

    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    class Service(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):  # noqa: N802 (the gRPC method's name)
            signature = served.signature(request.model_spec.name, request.model_spec.signature_name)
            outputs = signature(**{k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()})
            response = predict_pb2.PredictResponse()
            response.model_spec.CopyFrom(request.model_spec)
            for key, value in outputs.items():
                response.outputs[key].CopyFrom(tf.make_tensor_proto(value.numpy()))
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("localhost:0")
    server.start()
    return server, port


def rest_stand_in(served):
    """TF Serving's REST `POST /v1/models/NAME:predict`, row format, one input: (server, port)."""
    import base64
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            model = self.path.split("/v1/models/", 1)[1].split(":predict")[0]
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            signature = served.signature(model, body.get("signature_name"))
            (name,) = signature.structured_input_signature[1]
            texts = [base64.b64decode(v["b64"]) if isinstance(v, dict) else v.encode()
                     for v in body["instances"]]
            outputs = {k: v.numpy() for k, v in signature(**{name: tf.constant(texts)}).items()}
            rows = [{k: v[i].decode() if isinstance(v[i], bytes) else v[i].tolist()
                     for k, v in outputs.items()} for i in range(len(texts))]
            reply = json.dumps({"predictions": rows}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("localhost", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def test_every_python_fence_is_one_the_docs_test_reads():
    # A ```py, ```Python or ```python3 block would be skipped by `python_blocks`.
    for page in [ROOT / "README.md", *ROOT.glob("docs/*.md")]:
        raw = page.read_text(encoding="utf-8")
        fences = re.findall(r"^```(.*)$", raw, re.M)
        odd = [f for f in fences if f.strip().lower().startswith("py") and f != "python"]
        assert not odd, f"{page.name}: fences {odd} are not read as Python; write ```python"
        assert raw.count("```python\n") == len(python_blocks(page.relative_to(ROOT).as_posix()))


@pytest.mark.slow
def test_every_python_block_of_the_readme_and_the_docs_runs(tmp_path, monkeypatch, request):
    pages = {p.relative_to(ROOT).as_posix() for p in [ROOT / "README.md", *ROOT.glob("docs/*.md")]
             if python_blocks(p.relative_to(ROOT).as_posix())}
    assert pages == set(PAGES) | ELSEWHERE, "a page with Python blocks is neither run here nor listed"
    monkeypatch.chdir(tmp_path)  # the blocks write vocab.txt, saved_models/, runs/
    write_checkpoints(tmp_path)
    keras.utils.set_random_seed(0)
    served = Served(tmp_path / "saved_models")
    (rest, rest_port), (grpc, grpc_port) = rest_stand_in(served), grpc_stand_in(served)
    request.addfinalizer(rest.server_close)
    request.addfinalizer(rest.shutdown)
    request.addfinalizer(lambda: grpc.stop(None))
    ports = dict(zip(CLIENTS, (f"localhost:{rest_port}", f"localhost:{grpc_port}"), strict=True))
    namespace, ran, clients, used = {"__name__": "docs"}, 0, [], set()
    for page in PAGES:
        for number, code in enumerate(python_blocks(page), 1):
            for address, stand_in in ports.items():
                if address in code:
                    clients.append(f"{page} #{number}")
                    code = code.replace(address, stand_in)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                exec(compile(tiny(page, code, used), f"{page} (block {number})", "exec"), namespace)
            # Keras' warning for `shuffle` with a dataset (ELMoBiLM.fit gave it), and
            # the deprecated names the pages must not teach.
            assert not [w for w in caught if "`shuffle=True`" in str(w.message)
                        or "from_preset" in str(w.message)
                        or (issubclass(w.category, DeprecationWarning)  # tfnlp's old names
                            and "next release" in str(w.message))
                        ], (page, number)
            ran += 1
    missing = [f"{page}: {text!r}" for page, pairs in TINY.items() for text, _ in pairs
               if (page, text) not in used]
    assert not missing, f"no longer on the page (update TINY): {missing}"
    assert clients == ["docs/serving.md #1", "docs/serving.md #2"]
    assert ran == 22
    # The clients' answers: two reviews, each a label (name and id) and two probabilities.
    assert namespace["reply"].status_code == 200
    predictions = namespace["reply"].json()["predictions"]
    assert [sorted(p) for p in predictions] == [["label", "label_id", "probabilities"]] * 2
    assert namespace["labels"].shape == (2,) and namespace["probabilities"].shape == (2, 2)
    # What the blocks made is what they say they make.
    assert (tmp_path / "saved_models" / "reviews" / "2" / "saved_model.pb").exists()
    for export in ("translate_en_es", "elmo", "novel_lm"):
        assert (tmp_path / "saved_models" / export / "1" / "saved_model.pb").exists(), export
    assert namespace["vectors"].shape[-1] == 2 * 8  # ELMo: 2 x the projection
    # The tagger's export: words and entities of two texts, the second empty.
    assert (tmp_path / "saved_models" / "ner" / "1" / "saved_model.pb").exists()
    outputs = namespace["outputs"]
    assert outputs["num_words"].numpy().tolist() == [7, 0] and outputs["words"].shape == (2, 7)
    assert outputs["entity_texts"].shape == outputs["entity_starts"].shape
    assert set(namespace["report"]) >= {"per_type", "micro", "macro"}
    assert namespace["mine"].count_params() == namespace["bert"].count_params()
    for a, b in zip(namespace["mine"].weights, namespace["bert"].weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
