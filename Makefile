# Two commands set everything up on a fresh machine (Python 3.11 + the package index):
#   make demo   create .venv, install tfnlp, run the main job
#   make test   create .venv, install tfnlp with its test extra, run the tests
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo learning-curve test lint docs bench install clean cxx

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,examples,docs]"
	touch $(STAMP)

install: $(STAMP)

# The main job: pretrain a small BERT on the bundled novels and the training
# reviews (masked LM, token embeddings started from PPMI-SVD vectors), fine-tune
# it on the labelled reviews (mean pooling; next to TF-IDF and the same
# classifier from scratch), export it. Why these settings: docs/results.md.
PRETRAIN_BERT := $(BIN)/python examples/pretrain_bert.py --architecture bert_tiny --sequence-length 128 \
	--steps 4000 --steps-per-epoch 500 --learning-rate 1e-3 --no-next-sentence --review-texts \
	--domain-repeats 4 --dropout 0 --dtype-policy auto --token-embeddings ppmi \
	--output runs/bert_pretrain

demo: $(STAMP)
	$(PRETRAIN_BERT)
	$(BIN)/python examples/finetune_classifier.py --pretrained runs/bert_pretrain \
		--epochs 3 --pooling mean --export saved_models/reviews
	@echo "SavedModel: saved_models/reviews/1   TensorBoard: tensorboard --logdir runs"

# Test accuracy against the number of labelled reviews (docs/learning_curve.png
# and .json): the demo's pretrained BERT (its head trained alone first, then
# everything), the same network from scratch and TF-IDF, 3 seeds each.
# Pretrains first unless `make demo` already did.
learning-curve: $(STAMP)
	@test -f runs/bert_pretrain/backbone.keras || $(PRETRAIN_BERT)
	$(BIN)/python examples/finetune_classifier.py --pretrained runs/bert_pretrain \
		--learning-curve 100 300 1000 --seeds 3 --min-steps 200 --head-steps 200 --pooling mean --export "" \
		--logs runs/learning_curve --plot docs/learning_curve.png

# Test processes (pytest-xdist; each test file stays in one process, so module
# fixtures are built once). TEST_WORKERS=0 runs everything in this process.
# Files go to the workers in the order of tests/file_order.py
# (--no-loadscope-reorder): in the last two sessions the longest first (a
# measured list), so that no session ends with one worker running a long file
# alone while the other idles; the first keeps xdist's order.
TEST_WORKERS ?= 2

# The suite runs as three pytest sessions, each with fresh worker processes:
# a TensorFlow process never gives back all the memory of the functions it
# traced (about 25 MB for each small model built and trained, measured, even
# after keras.backend.clear_session() and gc.collect()), and one pair
# of workers for the whole suite grew past 10 GB each. Groups of about equal
# time; the last one is every test the first two do not hold.
TEST_GROUP_1 := tests/models tests/layers tests/generation tests/metrics tests/datasets
TEST_GROUP_2 := tests/export tests/data
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=10

# The tests build a C++ program against the tensorflow wheel (TF Serving's
# SavedModel loader, tests/export/serving/): they need a C++ compiler.
cxx:
	@command -v $${CXX:-g++} >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& apt-get update -qq && apt-get install -y -qq g++ >/dev/null; } \
		|| echo "warning: no C++ compiler (g++) and none could be installed: the serving tests will fail"

test: $(STAMP) cxx
	@failed=0; \
	$(PYTEST) $(TEST_GROUP_1) || failed=1; \
	$(PYTEST) $(TEST_GROUP_2) || failed=1; \
	$(PYTEST) tests $(addprefix --ignore=,$(TEST_GROUP_1) $(TEST_GROUP_2)) || failed=1; \
	exit $$failed

lint: $(STAMP)
	$(BIN)/ruff check tfnlp tests examples benchmarks

# The API reference, from the docstrings (pdoc, Google style), in docs/api/
# (not committed; tests/test_package.py checks that it builds without warnings).
docs: $(STAMP)
	$(BIN)/python -m pdoc --docformat google -o docs/api tfnlp
	@echo "API reference: docs/api/index.html"

# Every benchmark (about an hour on the 2-core project machine), then
# benchmarks/results/summary.md and the plots; the machine's matmul peak first.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/python benchmarks/machine_benchmark.py
	$(BIN)/python benchmarks/attention_benchmark.py
	$(BIN)/python benchmarks/attention_benchmark.py --policy mixed_bfloat16
	$(BIN)/python benchmarks/data_benchmark.py
	$(BIN)/python benchmarks/autotune_benchmark.py
	$(BIN)/python benchmarks/first_fit_benchmark.py
	$(BIN)/python benchmarks/first_batch_benchmark.py
	$(BIN)/python benchmarks/bert_benchmark.py
	$(BIN)/python benchmarks/bert_benchmark.py --presets bert_base --rounds 2 --steps 1 --jit 0 \
		--json benchmarks/results/bert_base.json
	$(BIN)/python benchmarks/bert_benchmark.py --profile --presets bert_tiny bert_small
	$(BIN)/python benchmarks/scatter_benchmark.py
	$(BIN)/python benchmarks/last_block_benchmark.py
	$(BIN)/python benchmarks/dropout_benchmark.py
	$(BIN)/python benchmarks/seq2seq_benchmark.py
	$(BIN)/python benchmarks/generation_benchmark.py
	$(BIN)/python benchmarks/elmo_benchmark.py
	$(BIN)/python benchmarks/serving_benchmark.py
	$(BIN)/python benchmarks/cpp_serving_benchmark.py
	$(BIN)/python benchmarks/input_length_benchmark.py
	$(BIN)/python benchmarks/onednn_benchmark.py
	$(BIN)/python benchmarks/report.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
