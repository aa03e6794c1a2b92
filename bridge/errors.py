"""The one exception hierarchy of olbridge.

    BridgeError
    ├── ValidationError      an input broke a rule (id, type, namespace, metadata, ...)
    │   ├── ValidationProblems     an input broke several rules at once, each reported
    │   └── InputFileError         an input file, or a line of it, cannot be read: missing, not UTF-8, not JSON
    ├── ConfigError          configuration file, environment or flags are wrong
    ├── BadValueError        a value given to a command is not one it takes (exit status 2)
    ├── MappingError         a naming rule file is wrong, or no rule can name an asset
    ├── CatalogError         the catalog cannot do what was asked (missing asset, bad schema version)
    │   ├── NotFoundError    an asset or task run that does not exist
    │   ├── Busy             the catalog cannot take a write now (locked, unreachable): retry later
    │   └── RunEndedError    a task run that already ended, given again with other content
    ├── ArtifactError        a dbt artifact (manifest, run results, profile) is missing or malformed
    ├── SourceError          a system olbridge reads from (a Prefect server) is unreachable or answers wrongly
    ├── ExportError          events could not be written to their destination
    ├── ReceiverError        a server (the receiver, the web view) cannot listen: its address is in use, ...
    └── Unavailable          the receiver's writer cannot take events now (busy, stopping): the client retries

The CLI turns every BridgeError into ``Error: <message>`` on stderr and a non-zero exit, in one place.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence


class BridgeError(Exception):
    """Base of every error olbridge raises on purpose."""


class ValidationError(BridgeError):
    """An input broke a rule.

    ``rule`` names the rule, ``value`` is the offending value and ``where`` says where it was
    (a field path such as ``outputs[0].id``, a line number, a JSON pointer).
    """

    def __init__(self, message: str, *, rule: str = "", value: object = None, where: str = "") -> None:
        self.message = message
        self.rule = rule
        self.value = value
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)

    def at(self, prefix: str) -> ValidationError:
        """The same error with its location nested under ``prefix``."""
        if not self.where:
            where = prefix
        elif self.where.startswith("["):
            where = prefix + self.where
        else:
            where = f"{prefix}.{self.where}"
        return type(self)(self.message, rule=self.rule, value=self.value, where=where)


class ValidationProblems(ValidationError):
    """Every problem found in one input (a task run record, say), so that all are reported at
    once; ``problems`` holds them, each a ValidationError with its own rule and place."""

    def __init__(self, problems: Sequence[ValidationError]) -> None:
        if not problems:
            raise ValueError("ValidationProblems needs at least one problem")
        self.problems = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems), rule=self.problems[0].rule)

    def at(self, prefix: str) -> ValidationProblems:
        return ValidationProblems([p.at(prefix) for p in self.problems])


class InputFileError(ValidationError):
    """An input file, or a part of it, that cannot be read as what it should hold: a file that is
    missing, unreadable or not UTF-8 text, a line or a JSON array that is not valid JSON.
    ``path`` names the file and ``line`` the line (None: the whole file); the error reads
    ``path:line: message``. Readers that go on past a bad line hand it over in the line's place
    (see :mod:`bridge.files`)."""

    def __init__(self, message: str, path: str, line: int | None = None, *, rule: str = "file") -> None:
        self.path = path
        self.line = line
        super().__init__(message, rule=rule, where=path if line is None else f"{path}:{line}")

    def at(self, prefix: str) -> InputFileError:
        """The same error: a place in a file is whole, and does not nest under another."""
        return self


class ConfigError(BridgeError):
    """Configuration is missing or wrong."""


class BadValueError(BridgeError):
    """A value given to a command (an option, the environment, a config setting) is not one it can
    take, such as a catalog URL libpq cannot read: the CLI exits with status 2, as for a usage
    error, and nothing was done."""


class MappingError(BridgeError):
    """A mapping rule file is wrong, or a rule cannot be applied."""


class CatalogError(BridgeError):
    """The catalog cannot carry out the request."""


class NotFoundError(CatalogError):
    """The asset or task run asked for does not exist."""


class NotInCatalog(NotFoundError):
    """An asset or run named by a user's id is in none of the catalog's records: the command line
    names the catalog it looked in (perhaps not the one meant)."""


class Busy(CatalogError):
    """The catalog cannot take a write now (locked, unreachable, losing every race): retry later."""


class RunEndedError(CatalogError):
    """A task run the catalog holds was given again with what it cannot take: other content after
    it ended (a task run ends once), or another start (its runId is made from it). ``key`` is the
    run's key (a :class:`bridge.model.TaskRunKey`), for the caller to say where it came from (a
    line of a file, a dbt invocation), and ``index`` its place among the runs recorded together
    (None: not known)."""

    def __init__(self, message: str, key: object, index: int | None = None) -> None:
        self.key = key
        self.index = index
        super().__init__(message)


class ArtifactError(BridgeError):
    """A dbt artifact is missing or malformed; the message names the file."""


class SourceError(BridgeError):
    """A system olbridge imports from could not be read: unreachable, a non-2xx answer, or a body
    that is not what its API documents; the message names the URL."""


class ExportError(BridgeError):
    """Events could not be delivered to their destination."""


class ReceiverError(BridgeError):
    """A server (the receiver, the web view) cannot start: the address it is to listen on is in
    use, does not resolve or is not this machine's, or the port needs privileges; or the system
    lets a process open fewer files than its connections need."""


_BIND_REASONS = {
    errno.EADDRINUSE: "the address is in use (another server listens on it; choose another --port)",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def cannot_listen(exc: OSError, host: str, port: int) -> ReceiverError:
    """What a failure to listen on ``host:port`` says (a host that does not resolve too: a
    socket.gaierror, whose codes, getaddrinfo's, are negative)."""
    code = exc.errno or 0
    if code < 0 or type(exc).__name__ == "gaierror":  # getaddrinfo's codes: negative on Linux, not everywhere
        reason = "the host does not resolve"
    else:
        reason = _BIND_REASONS.get(code) or (os.strerror(code) if code else str(exc))
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return ReceiverError(f"cannot listen on {where}: {reason}")


class Unavailable(BridgeError):
    """The catalog cannot take events right now (busy, locked, stopping, disk trouble): retry."""


class CommitUnknown(Unavailable):
    """The connection to the catalog was lost as a transaction committed, and whether it landed
    could not be asked: retry (a re-sent event that landed is answered duplicate)."""
