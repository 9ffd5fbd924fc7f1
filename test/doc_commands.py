"""The shell commands the docs give (README.md and docs/*.md, but docs/performance.md and
docs/reliability.md, whose commands test/scripts/test_doc_commands.py runs with ``--help``):
fenced ``bash``/``sh`` blocks, and inline code spans that start with a project command
(``./scripts/...``, ``.venv/bin/...``, ``sagemaker-tfs ...``).

``doc_blocks`` finds the fenced blocks, ``simple_commands`` cuts a block into the simple
commands a shell would run (continuations joined, comments, ``VAR=value`` prefixes and
redirections dropped, split at ``&&``, ``|``, ``;``, ``&`` and ``$( )``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGUAGES = ("bash", "sh", "shell", "console")
# Inline code spans that are commands of the project (the rest are names, values, paths).
INLINE_COMMAND = re.compile(
    r"`((?:[A-Z_]+=\S+ )*(?:\./scripts/|scripts/|\.venv/bin/|sagemaker-tfs )[^`/\s][^`]*)`"
)
_OPERATORS = {"&&", "||", "|", ";", "&", "(", ")", "$("}
_REDIRECTIONS = {">", ">>", "<", "2>", "2>&1"}


def doc_paths() -> list[Path]:
    others = ("performance.md", "reliability.md")
    docs = sorted(p for p in (REPO_ROOT / "docs").glob("*.md") if p.name not in others)
    return [REPO_ROOT / "README.md", *docs]


@dataclass(frozen=True)
class Block:
    """A fenced block: its file, the line of its opening fence, its language and text."""

    path: Path
    line: int
    language: str
    text: str

    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"


def doc_blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path`` (fences may be indented, inside list items)."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"^(\s*)```(\S*)\s*$", lines[index])
        if not opening:
            index += 1
            continue
        indent, language, start = opening.group(1), opening.group(2), index
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            body.append(
                lines[index][len(indent) :] if lines[index].startswith(indent) else lines[index]
            )
            index += 1
        blocks.append(Block(path, start + 1, language, "\n".join(body) + "\n"))
        index += 1
    return blocks


def shell_blocks() -> list[Block]:
    """The ``bash``/``sh`` blocks of every doc, except files shown whole (``#!`` first)."""
    return [
        block
        for path in doc_paths()
        for block in doc_blocks(path)
        if block.language in SHELL_LANGUAGES and not block.text.startswith("#!")
    ]


def inline_commands(path: Path) -> list[str]:
    """The inline code spans of ``path`` that run a project command."""
    return INLINE_COMMAND.findall(path.read_text().replace("\n", " "))


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line.replace("$(", " $( "), posix=True, punctuation_chars="();&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    # shlex splits "$(" into "$" and "("; put it back together
    joined: list[str] = []
    for token in tokens:
        if token == "(" and joined and joined[-1] == "$":
            joined[-1] = "$("
        else:
            joined.append(token)
    return joined


def simple_commands(text: str) -> Iterator[list[str]]:
    """The words of each simple command in a block of shell text."""
    logical = re.sub(r"\\\n", " ", text)
    for line in logical.splitlines():
        words: list[str] = []
        skip_next = False
        for token in [*_tokens(line), ";"]:
            if skip_next:
                skip_next = False
            elif token in _REDIRECTIONS or re.fullmatch(r"\d?[<>]+&?\d?", token):
                skip_next = not token.endswith("&1")
            elif token in _OPERATORS:
                command = _without_assignments(words)
                if command:
                    yield command
                words = []
            else:
                words.append(token)


def _without_assignments(words: list[str]) -> list[str]:
    index = 0
    while index < len(words) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[index]):
        index += 1
    rest = words[index:]
    return [] if rest == ["$"] else rest
