import json
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.harness import assert_allclose, assert_close_to_float32
from tfnlp import data, datasets, layers, models
from tfnlp.models import bert_backbone

RNG = np.random.default_rng(0)


def _inputs(batch=3, length=12, vocabulary_size=300, padding=(0, 4, 9)):
    token_ids = RNG.integers(5, vocabulary_size, (batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    for row, pad in enumerate(padding[:batch]):
        if pad:
            mask[row, -pad:] = 0
            token_ids[row, -pad:] = 0
    segments = np.zeros((batch, length), "int32")
    segments[:, length // 2:] = 1
    return {"token_ids": token_ids, "segment_ids": segments * mask, "padding_mask": mask}


@pytest.fixture
def backbone():
    return models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=300, max_sequence_length=32)


@pytest.mark.parametrize(
    "preset, expected", [("bert_base", 109_482_240), ("bert_large", 335_141_888)]
)
def test_published_parameter_counts(preset, expected, monkeypatch):
    # Exactly Hugging Face BertModel's counts for Google's 30,522-token vocabulary
    # (the paper rounds them to 110M and 340M). Counting needs no random
    # weights: zeros build BERT-large in a fraction of the time.
    monkeypatch.setattr(bert_backbone, "bert_kernel_initializer", keras.initializers.Zeros)
    backbone = models.BertBackbone.from_architecture(preset, vocabulary_size=30522)
    assert backbone.count_params() == expected
    assert backbone.intermediate_dim == 4 * backbone.hidden_dim


def test_compact_presets_match_hugging_face_models_of_the_released_configs(monkeypatch):
    # google-research/bert's 24 smaller models (Turc et al. 2019): the names
    # Tiny, Mini, Small and Medium stand for these (layers L, hidden H, heads A),
    # released as bert_uncased_L-{L}_H-{H}_A-{A} with a 4H feed-forward layer,
    # 512 positions and 2 segments. Each preset must build the same network:
    # as many parameters as transformers' BertModel of that configuration.
    import transformers  # the test extra's oracle

    monkeypatch.setattr(bert_backbone, "bert_kernel_initializer", keras.initializers.Zeros)
    released = {"bert_tiny": (2, 128, 2), "bert_mini": (4, 256, 4), "bert_small": (4, 512, 8),
                "bert_medium": (8, 512, 8)}
    assert set(released) | {"bert_base", "bert_large"} == set(models.BERT_ARCHITECTURES)
    for name, (layers_, hidden, heads) in released.items():
        config = transformers.BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers_,
                                         num_attention_heads=heads, intermediate_size=4 * hidden)
        backbone = models.BertBackbone.from_architecture(name, vocabulary_size=30522)
        assert backbone.count_params() == transformers.BertModel(config).num_parameters(), name
        assert (backbone.num_layers, backbone.hidden_dim, backbone.num_heads) == (layers_, hidden, heads)


@pytest.mark.parametrize(
    "model_name", ["backbone", "pretrainer", "pretrainer_mlm_only", "classifier", "classifier_mean"]
)
def test_config_round_trip_and_safe_mode_reload(tmp_path, backbone, model_name):
    x = _inputs()
    if model_name.startswith("pretrainer"):
        model = models.BertPretrainer(backbone, next_sentence=model_name == "pretrainer")
        x["masked_positions"] = np.array([[1, 2], [3, 4], [0, 1]], "int32")
    elif model_name.startswith("classifier"):
        pooling = "mean" if model_name == "classifier_mean" else "cls"
        model = models.BertClassifier(backbone, num_classes=3, pooling=pooling)
        assert model.get_config()["pooling"] == pooling
    else:
        model = backbone
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(model)))
    assert config["registered_name"].startswith("tfnlp>")
    if model_name == "backbone":
        assert config["config"]["layer_norm_epsilon"] == 1e-12
    rebuilt = keras.saving.deserialize_keras_object(config)
    assert rebuilt.count_params() == model.count_params()
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert_allclose(restored(x), model(x), atol=0.0)
    if model_name.startswith("pretrainer"):
        assert restored.masked_lm_head.token_embedding is restored.backbone.token_embedding
        assert restored.get_config() == model.get_config() == rebuilt.get_config()
        assert sorted(restored(x)) == sorted(model.output_names) == sorted(rebuilt.output_names)


def test_padding_does_not_change_real_tokens(backbone):
    x = _inputs(batch=1, length=8, padding=(0,))
    longer = {k: np.pad(v, [[0, 0], [0, 8]]) for k, v in x.items()}
    short_out = backbone(x)
    long_out = backbone(longer)
    assert_allclose(long_out["sequence_output"][:, :8], short_out["sequence_output"], atol=1e-5)
    assert_allclose(long_out["pooled_output"], short_out["pooled_output"], atol=1e-5)


def test_masked_lm_head_equals_full_projection_then_gather(backbone):
    pretrainer = models.BertPretrainer(backbone)
    x = _inputs()
    positions = np.array([[1, 5, 7], [0, 2, 3], [4, 4, 1]], "int32")
    logits = pretrainer({**x, "masked_positions": positions})["mlm"]
    sequence = backbone(x)["sequence_output"]
    head = pretrainer.masked_lm_head
    full = head._norm(head._transform(sequence)) @ tf.transpose(backbone.token_embedding.embeddings)
    full = full + head.output_bias
    assert_allclose(logits, tf.gather(full, positions, batch_dims=1), atol=1e-5)
    assert logits.dtype == tf.float32


def test_tied_weights_are_shared_not_copied(backbone):
    pretrainer = models.BertPretrainer(backbone)
    ids = {id(v) for v in pretrainer.weights}
    assert len(ids) == len(pretrainer.weights)
    assert id(backbone.token_embedding.embeddings) in ids
    assert pretrainer.count_params() - backbone.count_params() == (128 * 128 + 128) + 2 * 128 + 300 + (128 * 2 + 2)


def test_pretrainer_without_next_sentence_head(backbone):
    full = models.BertPretrainer(backbone)
    mlm_only = models.BertPretrainer(backbone, next_sentence=False)
    assert mlm_only.next_sentence_head is None and mlm_only.output_names == ["mlm"]
    assert full.count_params() - mlm_only.count_params() == 128 * 2 + 2  # the Dense(2) head
    assert mlm_only.get_config()["next_sentence"] is False and full.get_config()["next_sentence"] is True
    # The same backbone and masked-LM weights give the same masked-LM logits.
    mlm_only.masked_lm_head.set_weights(full.masked_lm_head.get_weights())
    x = {**_inputs(), "masked_positions": np.array([[1, 5, 7], [0, 2, 3], [4, 4, 1]], "int32")}
    outputs = mlm_only(x)
    assert list(outputs) == ["mlm"]
    assert_allclose(outputs["mlm"], full(x)["mlm"], atol=0.0)
    mlm_only.compile()
    assert list(mlm_only.loss) == ["mlm"]


def test_pretrainer_without_next_sentence_fits_full_sentence_batches(tmp_path, corpus_vocabulary):
    tokenizer = data.WordPieceTokenizer(corpus_vocabulary)
    documents = datasets.load_documents("en_novels", "validation").take(3)
    batches = data.bert_pretraining_dataset(
        documents, tokenizer, 32, max_predictions_per_seq=5, batch_size=4, next_sentence=False
    ).map(models.pretraining_batch)
    x, y, weights = next(iter(batches))
    assert list(y) == list(weights) == ["mlm"]
    backbone = models.BertBackbone.from_architecture(
        "bert_tiny", vocabulary_size=tokenizer.vocabulary_size(), max_sequence_length=32
    )
    pretrainer = models.BertPretrainer(backbone, next_sentence=False)
    pretrainer.compile()
    before = backbone.token_embedding.embeddings.numpy().copy()
    history = pretrainer.fit(batches.take(1), verbose=0)
    assert set(history.history) == {"loss", "mlm_accuracy"}
    assert np.isfinite(history.history["loss"]).all()
    assert not np.allclose(before, backbone.token_embedding.embeddings.numpy())
    path = str(tmp_path / "pretrainer.keras")
    pretrainer.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert_allclose(restored(x), pretrainer(x), atol=0.0)
    assert int(restored.optimizer.iterations.numpy()) == 1
    np.testing.assert_allclose(
        restored.evaluate(x, y, sample_weight=weights, verbose=0),
        pretrainer.evaluate(x, y, sample_weight=weights, verbose=0), rtol=1e-6,
    )


def test_pretrainer_and_classifier_train_a_step_under_xla(backbone):
    pretrainer = models.BertPretrainer(backbone)
    pretrainer.compile(jit_compile=True)
    x = {**_inputs(), "masked_positions": np.array([[1, 2], [3, 4], [0, 1]], "int32")}
    y = {"mlm": np.array([[7, 8], [9, 10], [11, 12]], "int32"), "nsp": np.array([0, 1, 0], "int32")}
    weights = {"mlm": np.array([[1, 1], [1, 0], [1, 1]], "int32"), "nsp": np.ones(3, "int32")}
    before = backbone.token_embedding.embeddings.numpy().copy()
    history = pretrainer.fit(x, y, sample_weight=weights, verbose=0, epochs=2)
    assert np.isfinite(history.history["loss"]).all()
    assert {"mlm_accuracy", "nsp_accuracy"} <= set(history.history)
    assert not np.allclose(before, backbone.token_embedding.embeddings.numpy())
    classifier = models.BertClassifier(backbone, num_classes=2)
    classifier.compile(jit_compile=True)
    history = classifier.fit(_inputs(), np.array([0, 1, 1]), verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_mixed_bfloat16(backbone):
    mixed = models.BertBackbone.from_architecture(
        "bert_tiny", vocabulary_size=300, max_sequence_length=32, dtype="mixed_bfloat16"
    )
    mixed.set_weights(backbone.get_weights())
    x = _inputs()
    out = mixed(x)
    assert out["sequence_output"].dtype == tf.bfloat16
    assert_close_to_float32(out, backbone(x))  # each output at its own scale (pooled: RMS 0.2)
    pretrainer = models.BertPretrainer(mixed)
    logits = pretrainer({**x, "masked_positions": np.zeros((3, 2), "int32")})["mlm"]
    assert logits.dtype == tf.float32
    # The head runs in float32 under mixed precision: in bfloat16 it cost 1.6
    # points of held-out masked-LM accuracy after 400 BERT-small steps.
    assert pretrainer.masked_lm_head.compute_dtype == "float32"
    previous = keras.config.dtype_policy()
    try:  # also when the policy is global (the Functional model's own policy then)
        keras.config.set_dtype_policy("mixed_bfloat16")
        globally = models.BertPretrainer(models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=300))
        assert globally.backbone.transformer_layers[0].compute_dtype == "bfloat16"
        assert globally.masked_lm_head.compute_dtype == "float32"
    finally:
        keras.config.set_dtype_policy(previous)
    # A Functional model ignores `dtype`; the policy must survive the config.
    restored = models.BertBackbone.from_config(mixed.get_config())
    assert restored.get_config()["dtype"]["config"]["name"] == "mixed_bfloat16"
    assert restored(x)["sequence_output"].dtype == tf.bfloat16


@pytest.mark.parametrize(
    "kwargs, message",
    [({"num_heads": 3}, "divisible"), ({"dropout": 1.0}, "dropout"), ({"num_layers": 0}, "num_layers"),
     ({"layer_norm_epsilon": 0.0}, "`layer_norm_epsilon` must be a positive number"),
     ({"layer_norm_epsilon": "1e-5"}, "`layer_norm_epsilon` must be a positive number")],
)
def test_bad_backbone_configuration(kwargs, message):
    config = {"vocabulary_size": 100, "num_layers": 2, "num_heads": 2, "hidden_dim": 16, **kwargs}
    with pytest.raises(ValueError, match=message):
        models.BertBackbone(**config)


def test_bad_task_arguments(backbone):
    with pytest.raises(ValueError, match="`architecture` must be one of"):
        models.BertBackbone.from_architecture("bert_huge", vocabulary_size=10)
    with pytest.raises(ValueError, match="BertBackbone"):
        models.BertPretrainer(keras.Sequential())
    with pytest.raises(ValueError, match="num_classes"):
        models.BertClassifier(backbone, num_classes=0)
    with pytest.raises(ValueError, match=r"`pooling` must be one of \('cls', 'mean'\), got 'max'"):
        models.BertClassifier(backbone, num_classes=2, pooling="max")
    with pytest.raises(ValueError, match="rows"):
        layers.MaskedLMHead(10, token_embedding=keras.layers.Embedding(11, 4))


def test_mean_pooling_is_the_mean_over_real_tokens_then_the_dense_layer(backbone):
    classifier = models.BertClassifier(backbone, num_classes=3, pooling="mean", dropout=0.5)
    x = _inputs()
    sequence = backbone(x)["sequence_output"].numpy()
    mask = x["padding_mask"][:, :, None]
    mean = (sequence * mask).sum(1) / mask.sum(1)  # written out: no tfnlp code
    kernel, bias = (w.numpy() for w in classifier.output_dense.weights)
    assert_allclose(classifier(x), mean @ kernel + bias, atol=1e-5)
    # Padding added at the end changes nothing, and the pooler is not read.
    longer = {k: np.pad(v, [[0, 0], [0, 6]]) for k, v in x.items()}
    assert_allclose(classifier(longer), classifier(x), atol=1e-5)
    before = classifier(x)
    for weight in backbone.pooler.weights:
        weight.assign(weight + 1.0)
    assert_allclose(classifier(x), before, atol=0.0)


def test_mean_pooling_of_an_empty_row_is_zero_not_nan():
    from tfnlp.models.bert_classifier import masked_mean

    pooled = masked_mean(tf.ones((2, 3, 4), "bfloat16"), tf.constant([[1, 1, 0], [0, 0, 0]]))
    assert pooled.dtype == tf.float32
    np.testing.assert_array_equal(pooled.numpy(), [[1.0] * 4, [0.0] * 4])


def test_mean_pooling_fine_tunes_on_texts_and_exports(tmp_path):
    from tfnlp import export

    vocab = list(data.SPECIAL_TOKENS) + ["good", "bad", "food", "coffee"]
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 8)
    backbone = models.BertBackbone(len(vocab), num_layers=1, num_heads=2, hidden_dim=16,
                                   max_sequence_length=8)
    classifier = models.BertClassifier(backbone, preprocessor=preprocessor, labels=["neg", "pos"],
                                       pooling="mean")
    classifier.compile(optimizer=keras.optimizers.Adam(1e-2))
    texts, labels = ["good food", "bad food", "good coffee", "bad coffee"] * 8, ["pos", "neg"] * 16
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        classifier.fit(texts, labels, epochs=15, batch_size=8, verbose=0)
    # The pooler, which no output reads, is not handed to the optimizer.
    assert not [w for w in caught if "Gradients do not exist" in str(w.message)]
    assert not {id(w) for w in backbone.pooler.weights} & {id(w) for w in classifier.trainable_weights}
    listed = classifier.trainable_weights + classifier.non_trainable_weights
    assert sorted(id(w) for w in listed) == sorted(id(w) for w in classifier.weights)
    assert classifier.predict_labels(["good food", "bad coffee"]) == ["pos", "neg"]
    export.export_classifier(classifier, str(tmp_path / "served"))
    served = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures["serving_default"]
    got = served(text=tf.constant(["good food", "bad coffee", ""]))["probabilities"].numpy()
    want = keras.ops.softmax(classifier.predict(["good food", "bad coffee", ""], verbose=0)).numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_sequence_longer_than_position_table_is_a_clear_error(backbone):
    x = _inputs(batch=1, length=40, padding=(0,))
    with pytest.raises(Exception, match="sequence_length"):
        backbone(x)


def test_pretrainer_default_loss_equals_keras_sparse_cross_entropy(backbone):
    # compile()'s faster cross-entropy keeps Keras' weighting and reduction.
    pretrainer = models.BertPretrainer(backbone)
    x = {**_inputs(), "masked_positions": np.array([[1, 2], [3, 4], [0, 1]], "int32")}
    y = {"mlm": np.array([[7, 8], [9, 10], [11, 12]], "int32"), "nsp": np.array([0, 1, 0], "int32")}
    weights = {"mlm": np.array([[1, 1], [1, 0], [1, 1]], "float32"), "nsp": np.ones(3, "float32")}
    outputs = pretrainer(x)
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    pretrainer.compile(weighted_metrics=[])
    for name in ("mlm", "nsp"):
        ours = pretrainer.loss[name](y[name], outputs[name], sample_weight=weights[name])
        np.testing.assert_allclose(
            ours, keras_loss(y[name], outputs[name], sample_weight=weights[name]), rtol=1e-6
        )


def test_too_long_input_error_gives_the_lengths_without_dumping_the_arrays():
    backbone = models.BertBackbone(50, num_layers=1, num_heads=2, hidden_dim=8, max_sequence_length=4)
    ids = np.full((2, 7), 11, "int32")  # 11 would show in a dump of the array
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    for call in (lambda: backbone(x), lambda: backbone.predict(x, verbose=0)):
        with pytest.raises(ValueError) as error:
            call()
        message = str(error.value)
        assert "is 7, more than `max_sequence_length` (4)" in message
        assert "11" not in message and "Arguments received" not in message


def test_layer_norm_epsilon_is_a_serialized_argument():
    backbone = models.BertBackbone(100, num_layers=2, num_heads=2, hidden_dim=16, layer_norm_epsilon=1e-5)
    norms = [backbone.embeddings_norm] + [
        norm for block in backbone.transformer_layers
        for norm in (block._self_attention_norm, block._feedforward_norm)
    ]
    assert {norm.epsilon for norm in norms} == {1e-5}
    pretrainer = models.BertPretrainer(backbone)
    assert pretrainer.masked_lm_head.layer_norm_epsilon == 1e-5
    config = json.loads(json.dumps(backbone.get_config()))
    assert config["layer_norm_epsilon"] == 1e-5
    assert models.BertBackbone.from_config(config).get_config() == backbone.get_config()
    rebuilt = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(pretrainer))))
    assert rebuilt.masked_lm_head.layer_norm_epsilon == rebuilt.backbone.layer_norm_epsilon == 1e-5
    del config["layer_norm_epsilon"]  # a config written before the argument existed
    assert models.BertBackbone.from_config(config).layer_norm_epsilon == 1e-12


def test_encode_is_the_sequence_output_and_computes_only_the_positions_asked_for(backbone):
    x = _inputs()
    sequence = backbone(x)["sequence_output"]
    assert_allclose(backbone.encode(x), sequence, atol=1e-6)
    positions = np.array([[0, 5], [3, 3], [0, 11]], "int32")
    assert_allclose(backbone.encode(x, output_positions=positions),
                    np.take_along_axis(sequence.numpy(), positions[..., None], axis=1), atol=1e-5)
    with pytest.raises(ValueError, match=r"`output_positions` must be in \[0, 12\)"):
        backbone.encode(x, output_positions=np.array([[0, 12]] * 3, "int32"))


@pytest.mark.parametrize("cls, args", [
    (models.BertBackbone, ("bert_tiny", 50)),
    (models.UniLMBackbone, ("bert_tiny", 50)),
    (models.TransformerSeq2Seq, ("transformer_small", 50, 60)),
    (models.ELMoBiLM, ("elmo_small", 50)),
])
def test_from_preset_still_works_for_a_release_with_a_deprecation_warning(cls, args):
    with pytest.warns(DeprecationWarning, match=rf"`{cls.__name__}.from_preset` is deprecated.*from_architecture"):
        old = cls.from_preset(*args, num_sampled=None) if cls is models.ELMoBiLM else cls.from_preset(*args)
    new = cls.from_architecture(*args, num_sampled=None) if cls is models.ELMoBiLM else cls.from_architecture(*args)
    assert type(old) is cls
    assert {k: v for k, v in old.get_config().items() if k != "name"} == \
        {k: v for k, v in new.get_config().items() if k != "name"}


def test_the_tanh_gelu_is_an_argument_kept_by_the_config_and_a_keras_file(tmp_path):
    approximate = models.BertBackbone(60, 1, 2, 16, max_sequence_length=8, activation="gelu_approximate")
    exact = models.BertBackbone.from_config({**approximate.get_config(), "activation": "gelu"})
    exact.set_weights(approximate.get_weights())
    pretrainer = models.BertPretrainer(approximate)
    assert pretrainer.masked_lm_head.activation is layers.gelu_approximate  # as Google's cls/predictions
    assert approximate.transformer_layers[0].activation is layers.gelu_approximate
    x = {"token_ids": np.array([[2, 7, 9, 3]], "int32"), "segment_ids": np.zeros((1, 4), "int32"),
         "padding_mask": np.ones((1, 4), "int32")}
    assert np.abs(np.asarray(approximate(x)["sequence_output"]) - np.asarray(exact(x)["sequence_output"])).max() > 0
    path = tmp_path / "approximate.keras"
    pretrainer.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert restored.backbone.activation == "gelu_approximate"
    assert_allclose(restored.backbone(x), approximate(x), atol=0.0)
    with pytest.raises(ValueError, match=r"`activation` must be one of \('gelu', 'gelu_approximate'\)"):
        models.BertBackbone(60, 1, 2, 16, activation="relu")


@pytest.mark.parametrize("module, old, new", [
    ("tfnlp.models", "BERT_PRESETS", "BERT_ARCHITECTURES"),
    ("tfnlp.models", "ELMO_PRESETS", "ELMO_ARCHITECTURES"),
    ("tfnlp.models", "TRANSFORMER_PRESETS", "TRANSFORMER_ARCHITECTURES"),
    ("tfnlp.models.bert_backbone", "BERT_PRESETS", "BERT_ARCHITECTURES"),
    ("tfnlp.models.elmo", "ELMO_PRESETS", "ELMO_ARCHITECTURES"),
    ("tfnlp.models.transformer_seq2seq", "TRANSFORMER_PRESETS", "TRANSFORMER_ARCHITECTURES"),
])
def test_the_tables_renamed_from_presets_still_work_for_a_release(module, old, new):
    module = __import__(module, fromlist=["_"])
    with pytest.warns(DeprecationWarning, match=rf"`{module.__name__}.{old}` is deprecated .* use `{module.__name__}.{new}`"):
        value = getattr(module, old)
    assert value is getattr(module, new)
    with pytest.raises(AttributeError, match="has no attribute 'NOT_A_TABLE'"):
        module.NOT_A_TABLE  # noqa: B018
