"""What several commands share on the command line, declared once: option factories, and the hidden
aliases that keep a renamed command's old name working."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import click

from bridge.cli.output import say

F = TypeVar("F", bound=Callable[..., Any])


def history_filters(fn: F) -> F:
    """``--since``, ``--until``, ``--namespace`` and ``--flow``: the part of the catalog's history
    that a command reads (``export``, ``backfill``). The command gets them as ``since``, ``until``,
    ``namespace`` and ``flow``, all ``str | None``, and reads them with
    :func:`bridge.model.parse_window` and :func:`bridge.model.check_namespace`."""
    options = [
        click.option("--since", help="Only history from this time (ISO 8601; a date or a time without offset is UTC)."),
        click.option("--until", help="Only history before this time."),
        click.option("--namespace", help="Only this flow namespace (and asset changes in this namespace)."),
        click.option("--flow", help="Only this flow id (asset changes belong to no flow and are left out)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def json_flag(help: str) -> Callable[[F], F]:
    """``--json``, given to the command as ``as_json``: print the command's result as JSON on stdout."""
    return click.option("--json", "as_json", is_flag=True, help=help)


class DeprecatedAlias(click.Command):
    """A command under the name it had before it was renamed: hidden from the help, it runs the
    same and says on stderr which name to use instead."""

    def __init__(self, name: str, target: click.Command) -> None:
        super().__init__(
            name,
            context_settings=target.context_settings,
            callback=target.callback,
            params=target.params,
            help=f"Deprecated: the old name of {target.name!r}.\n\n{inspect.cleandoc(target.help or '')}",
            epilog=target.epilog,
            options_metavar=target.options_metavar,
            add_help_option=target.add_help_option,
            no_args_is_help=target.no_args_is_help,
            hidden=True,
        )
        self.target = target

    def invoke(self, ctx: click.Context) -> Any:
        parent = f"{ctx.parent.command_path} " if ctx.parent is not None else ""
        say(f"warning: '{ctx.command_path}' is deprecated; use '{parent}{self.target.name}'")
        return super().invoke(ctx)


def deprecated_alias(target: click.Command, old_name: str) -> DeprecatedAlias:
    """``target`` under ``old_name``, for the group that holds ``target`` to add beside it."""
    return DeprecatedAlias(old_name, target)
