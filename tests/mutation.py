"""Mutation testing of the modules that keep olbridge's promises (docs/testing.md): mutmut on a
copy of the project (in ``.mutants/``, git-ignored), mutating only the named modules and running
only the tests of the promises they keep.

    python -m tests.mutation                        # every module below (long: hours on 2 cores)
    python -m tests.mutation bridge/config.py       # one module, with its tests
    python -m tests.mutation --max-children 1 ...   # mutmut's other options pass through

It prints the score (mutants killed of those tried) and each surviving mutant's name; ``cd
.mutants && ../.venv/bin/mutmut show NAME`` shows one's change.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".mutants"

# each module that keeps a promise, and the tests that hold it to it
PROMISES = {
    "bridge/delivery/backfill.py": ["tests/test_backfill.py"],  # the backfill's checkpoint
    "bridge/delivery/claims.py": ["tests/test_claims.py"],  # outbox rows claimed, side by side
    "bridge/catalog/outbox.py": ["tests/test_outbox.py", "tests/test_claims.py"],
    "bridge/delivery/lease.py": ["tests/test_workers.py"],  # one stream worker at a time (SQLite)
    # the tokens, the namespaces each may write, the token files
    "bridge/config.py": ["tests/test_tokens.py", "tests/test_config.py", "tests/test_secrets.py"],
    "bridge/receiver/app.py": ["tests/test_tokens.py", "tests/test_forward.py"],  # token judgement, forwarding
    "bridge/receiver/events.py": ["tests/test_forward.py"],  # a batch's events as written
    "bridge/catalog/copy.py": ["tests/test_copy.py"],  # the copy and its check
}


def configure(modules: list[str]) -> str:
    """The ``[tool.mutmut]`` table for ``modules``: them only, with their tests only."""
    tests = sorted({test for module in modules for test in PROMISES[module]})
    listed = lambda items: "[" + ", ".join(f'"{item}"' for item in items) + "]"  # noqa: E731
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["bridge"]\n'
        f"only_mutate = {listed(modules)}\n"
        f"pytest_add_cli_args_test_selection = {listed(tests)}\n"
        'also_copy = ["tests", "mappings"]\n'
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"modules to mutate [default: all of {', '.join(PROMISES)}]")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once [default: 1]")
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in PROMISES]
    if unknown:
        parser.error(f"not a module this knows the tests of: {', '.join(unknown)} (one of {', '.join(PROMISES)})")
    modules = args.modules or list(PROMISES)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    for folder in ("bridge", "tests", "mappings"):
        shutil.copytree(ROOT / folder, WORK / folder, ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
    (WORK / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text() + configure(modules))
    mutmut = str(Path(sys.executable).parent / "mutmut")
    subprocess.run([mutmut, "run", "--max-children", str(args.max_children)], cwd=WORK, check=False)
    listed = subprocess.run([mutmut, "results", "--all", "true"], cwd=WORK, capture_output=True, text=True)
    outcomes = dict(re.findall(r"^\s*(\S+): (\w[\w ]*)$", listed.stdout, re.MULTILINE))
    killed = sum(1 for status in outcomes.values() if status == "killed")
    survived = sorted(name for name, status in outcomes.items() if status == "survived")
    others = sorted(f"{name} ({status})" for name, status in outcomes.items() if status not in ("killed", "survived"))
    tried = killed + len(survived)
    print(f"\n{', '.join(modules)}: {killed} of {tried} mutants killed ({killed / max(tried, 1):.0%})")
    for name in survived:
        print(f"  survived: {name}")
    for name in others:
        print(f"  {name}")
    return 0 if not survived else 1


if __name__ == "__main__":
    sys.exit(main())
