"""The root group's commands, each imported from its module when it is first asked for: a command
starts without importing the others' dependencies (the web UI's, the receiver's, the adapters').
``olbridge --help`` lists them all, and so imports them all."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping

import click


class LazyCommands(MutableMapping[str, click.Command]):
    """Commands by name, given as ``"module:attribute"`` and imported on first use; a command
    added as an object (``Group.add_command``) is kept as it is."""

    def __init__(self, where: Mapping[str, str]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        found = self._loaded.get(name)
        if found is None:
            module, _, attribute = self._where[name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self._where[name]} is not a click command")
            found = self._loaded[name] = command
        return found

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._where.pop(name, None)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._where.pop(name, None)
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._where or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._where, *self._loaded]))

    def __len__(self) -> int:
        return len(self._where.keys() | self._loaded.keys())
