"""The examples people copy: the Examples section of the main commands' ``--help``, and every
``olbridge`` command line of the README's and docs' console blocks, name commands and options
that exist, each option given the values it takes (parsed by click's own parser)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bridge.cli import cli

ROOT = Path(__file__).resolve().parents[1]
MAIN = [
    ("serve",),
    ("stream",),
    ("export",),
    ("backfill",),
    ("record",),
    ("dbt", "import"),
    ("lineage",),
    ("runs", "list"),
    ("assets", "list"),
    ("import",),
    ("validate",),
]


def joined(lines: list[str]) -> Iterator[str]:
    """Lines with their ``\\`` continuations joined."""
    held = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            held += line.rstrip()[:-1] + " "
            continue
        yield held + line
        held = ""


def words(line: str) -> list[str]:
    """A command line's words, without its comment or what a shell would run after it."""
    text = re.split(r"\s+#\s", line, maxsplit=1)[0]
    text = re.split(r"\s(?:&&|\|\|?|;)\s", text, maxsplit=1)[0]
    return shlex.split(text.replace("[", " ").replace("]", " "))


def check(argv: list[str], where: str) -> None:
    """``argv`` (after ``olbridge``) parses: its global options, its command path, then the
    command's options and their values, as click reads them (without converting the values)."""
    assert argv, where
    command: click.Command = cli
    path: list[str] = []
    args = list(argv)
    # each context the child of the one above, as when olbridge runs: what a command's help
    # option is named (-h too) comes from the top
    context = click.Context(cli, info_name="olbridge", **cli.context_settings)
    while isinstance(command, click.Group):
        parser = command.make_parser(context)
        parser.allow_interspersed_args = False
        _, rest, _ = parser.parse_args(args)
        assert rest, f"{where}: no command after {' '.join(['olbridge', *path])}"
        name, args = rest[0], rest[1:]
        found = command.get_command(context, name)
        assert found is not None, f"{where}: no command {' '.join(['olbridge', *path, name])}"
        command, path = found, [*path, name]
        context = click.Context(command, info_name=name, parent=context)
    try:
        _, positional, _ = command.make_parser(context).parse_args(args)
    except click.UsageError as exc:
        pytest.fail(f"{where}: olbridge {' '.join(path)}: {exc.format_message()}")
    takes = sum(
        -1 if p.nargs == -1 else p.nargs for p in command.params if isinstance(p, click.Argument)
    )  # -1 a variadic argument
    assert takes < 0 or len(positional) <= takes, f"{where}: too many arguments {positional}"


def epilog_examples(path: tuple[str, ...]) -> list[str]:
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="olbridge")
    assert result.exit_code == 0, result.output
    found = re.search(r"\n +Examples:\n(.*)", result.stdout, flags=re.S)
    assert found, f"olbridge {' '.join(path)} --help has no Examples section"
    return [line.strip() for line in found.group(1).splitlines() if line.strip()]


@pytest.mark.parametrize("path", MAIN, ids=" ".join)
def test_the_main_commands_help_ends_with_examples_that_parse(path: tuple[str, ...]) -> None:
    examples = list(joined(epilog_examples(path)))
    assert examples
    for line in examples:
        argv = words(line)
        assert argv[0] == "olbridge" and argv[1 : 1 + len(path)] == list(path), line
        check(argv[1:], f"olbridge {' '.join(path)} --help: {line}")


def console_lines(text: str) -> Iterator[str]:
    """The ``olbridge`` command lines of a Markdown text's console blocks: where a block has
    ``$`` prompts, only the lines after one (the others are output)."""
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        lines = list(joined(block.splitlines()))
        prompted = any(line.startswith("$ ") for line in lines)
        for line in lines:
            if prompted:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            line = line.strip()
            line = re.sub(r"^([A-Z_]+=\S+\s+)+", "", line)  # VARIABLE=value before the command
            if line.startswith(".venv/bin/olbridge "):
                line = line[len(".venv/bin/") :]
            if line.startswith("olbridge "):
                yield line


DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


@pytest.mark.parametrize("document", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_command_lines_parse(document: Path) -> None:
    for line in console_lines(document.read_text(encoding="utf-8")):
        check(words(line)[1:], f"{document.relative_to(ROOT)}: {line}")


def test_the_docs_have_command_lines_to_check() -> None:
    counted = {p.name: len(list(console_lines(p.read_text(encoding="utf-8")))) for p in DOCS}
    assert counted["README.md"] >= 15 and counted["cli.md"] >= 25, counted
