# Two commands a new user needs:  `make repro` (set up + run the embedded default pipeline)
# and `make test` (set up + run the test suite). Both create the environment when it is missing.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: setup repro snakemake test test-fast validate mlflow-ui clean-outputs

setup: $(VENV)/.installed

# requirements.lock pins every package the numbers were produced with; the package itself is editable.
# uv (pinned below) installs the same wheels as pip and byte-compiles them, both on every core: from a
# fresh clone with empty caches 72-88 s against 121-143 s for pip and a parallel compileall (two
# alternating pairs on a 2-core AMD EPYC; docs/reproducibility.md). INSTALLER=pip uses pip alone (e.g.
# where only pip's configured index is reachable). Either leaves a file this Python cannot compile
# (torch ships one for Python 3.12) to fail only if it is imported.
INSTALLER ?= uv
UV_VERSION := 0.13.9
$(VENV)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
ifeq ($(INSTALLER),uv)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode -r requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
else ifeq ($(INSTALLER),pip)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-compile -r requirements.lock
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	$(BIN)/pip install --quiet --no-deps -e .
else
	$(error INSTALLER=$(INSTALLER): use INSTALLER=uv (the default) or INSTALLER=pip)
endif
	touch $@

validate: setup
	dssl validate params.yaml

# `dag write` validates params.yaml and renders dvc.yaml from the stage catalogue (a no-op when the
# grid is unchanged). The warm stage server pays torch/MLflow imports once (every stage still runs in
# its own process); while it starts, the tracking store is created. `dssl repro` is `dvc repro` with
# one stage per core at a time (the same stages run and the same dvc.lock files; `dvc repro` still works).
repro: setup
	dssl dag write --params params.yaml
	dssl warm start --params params.yaml
	dssl repro --params params.yaml; status=$$?; dssl warm stop; exit $$status

# The same with Snakemake, then DVC records what it produced. Another params file runs in its own
# pipeline folder, runs/<profile>/ (docs/cluster.md), e.g. on a SLURM cluster:
#   make snakemake PARAMS=configs/paper.yaml SNAKEMAKE_ARGS="--profile profiles/slurm"
PARAMS ?= params.yaml
SNAKEMAKE_ARGS ?= --cores all
snakemake: setup
	dssl dag write --params $(PARAMS)
	dssl warm start
	snakemake $(SNAKEMAKE_ARGS) --configfile $(PARAMS); status=$$?; dssl warm stop; exit $$status
	dvc commit -f $$(dssl dag files --params $(PARAMS))

test: setup
	pytest -n 2 -q --durations=20

test-fast: setup
	pytest -n 2 -q -m "not slow"

mlflow-ui: setup
	mlflow ui --backend-store-uri sqlite:///$(abspath mlflow.db)
