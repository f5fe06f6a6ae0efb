# toolloop: every command a developer or CI runs.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# mypy cannot follow setuptools' editable finder, so lint reads the package
# through a farm of symlinks that rebuilds the `toolloop` tree.
TYPED   := build/typed
PKGS    := engine states effects specs tools

.PHONY: install demo test lint bench mutation diagram test-servers soak clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	command -v dot >/dev/null || (apt-get update -qq && apt-get install -y -qq graphviz) \
		|| echo "warning: install Graphviz (dot) for toolloop diagram --format svg|png"
	touch $@

demo: install
	$(BIN)/toolloop demo

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	rm -rf $(TYPED) && mkdir -p $(TYPED)/toolloop
	for p in $(PKGS); do ln -s ../../../$$p $(TYPED)/toolloop/$$p; done
	cd $(TYPED) && ../../$(BIN)/mypy -p toolloop

bench: install
	$(BIN)/python -m tests.bench

mutation: install
	$(BIN)/python -m tests.mutation $(ARGS)

# 10,000 turns per backend on virtual time (about 5 minutes on 2 cores); rewrites
# the memory plot in docs/reliability.md and fails on any leak.
soak: install
	$(BIN)/python -m tests.reliability.soak --turns 10000 --plot docs/reliability.md

diagram: install
	$(BIN)/toolloop diagram --format mermaid

# Builds both llama.cpp servers once per machine (cached outside the repo,
# see tests/servers/build.py), then runs the suite against them.
test-servers: install
	$(BIN)/python -m tests.servers.build
	$(BIN)/python -m pytest -m servers tests/servers

clean:
	rm -rf $(VENV) build mutants .hypothesis
