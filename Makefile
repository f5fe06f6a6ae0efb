# toolloop: every command a developer or CI runs.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# mypy and mkdocstrings cannot follow setuptools' editable finder, so lint and
# docs read the package through a farm of symlinks that rebuilds the `toolloop` tree.
TYPED   := build/typed
PKGS    := engine states effects specs tools
# The wheel check installs the built wheel where nothing of the project is.
WHEEL   := build/wheel-check

.PHONY: install typed demo test lint docs docs-serve wheel-check bench mutation diagram test-servers soak clean

# The development setup: editable, every extra, the tested versions (constraints.txt).
# Graphviz is optional (`toolloop diagram --format svg|png` says how to get it).
install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[cli,trio,test,docs]'
	touch $@

demo: install
	$(BIN)/toolloop demo

test: install
	$(BIN)/python -m pytest

lint: install typed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	cd $(TYPED) && ../../$(BIN)/mypy -p toolloop

typed:
	rm -rf $(TYPED) && mkdir -p $(TYPED)/toolloop
	for p in $(PKGS); do ln -s ../../../$$p $(TYPED)/toolloop/$$p; done
	for f in __init__.py durable.py py.typed; do ln -s ../../../toolloop/$$f $(TYPED)/toolloop/$$f; done

# The documentation site (mkdocs.yml); --strict fails on a broken link or reference.
docs: install typed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

docs-serve: install typed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# What a user gets: build the sdist and the wheel, install the wheel with its
# `cli` extra into a fresh venv (no test tools, nothing editable), then run
# there, outside the repository: `import toolloop` and a turn under both anyio
# backends (tests/wheel_check.py), the embedding example of docs/embedding.md,
# and `toolloop demo`; and with no extra at all: `import toolloop`, and the
# command naming the extra it needs.
wheel-check: install
	rm -rf $(WHEEL) && mkdir -p $(WHEEL)
	$(BIN)/python -m build --sdist --wheel --outdir $(WHEEL)/dist . >$(WHEEL)/build.log
	ls -l $(WHEEL)/dist
	$(PY) -m venv $(WHEEL)/venv
	$(WHEEL)/venv/bin/pip install -q "$$(ls $(WHEEL)/dist/*.whl)[cli]"
	$(BIN)/python -m tests.docs_samples docs/embedding.md 1 >$(WHEEL)/embedding.py
	cd $(WHEEL) && venv/bin/python ../../tests/wheel_check.py
	cd $(WHEEL) && venv/bin/python embedding.py
	cd $(WHEEL) && venv/bin/toolloop demo >demo.out && tail -n 4 demo.out
	$(PY) -m venv $(WHEEL)/bare
	$(WHEEL)/bare/bin/pip install -q "$$(ls $(WHEEL)/dist/*.whl)"
	cd $(WHEEL) && bare/bin/python -c "import toolloop; print('no extras: import toolloop')"
	cd $(WHEEL) && bare/bin/toolloop demo 2>demo.err; test $$? -eq 2 && grep "toolloop\[cli\]" demo.err

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
