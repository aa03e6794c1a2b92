"""What every command runs with: the application context (the config, the catalog opened once, the
naming rules), the decorator that hands it to a command typed, and the root group's error handling.

A command takes the context as its first argument::

    @click.command()
    @pass_app
    def show(app: AppContext, asset_id: str) -> None: ...
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import attrs
import click
from click.core import ParameterSource

from bridge.catalog import Catalog
from bridge.catalog.engine import catalog_target, masked, url_password
from bridge.catalog.engines import storage_error
from bridge.cli.output import say
from bridge.config import Config
from bridge.errors import (
    BadValueError,
    BridgeError,
    CatalogError,
    InputFileError,
    NotInCatalog,
    ValidationError,
    ValidationProblems,
)
from bridge.mapping import Resolver
from bridge.model.urls import url_problem
from bridge.openlineage.convert import Converter, ConvertOptions

# The root group's; every group and command below it inherits them from its parent context.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


if TYPE_CHECKING:  # generic from click 8.2 on; the dependency allows 8.1
    _ParamType = click.ParamType[str | Path]
else:
    _ParamType = click.ParamType


class CatalogParam(_ParamType):
    """``--catalog``: a database URL as it is, else a file path (a Path)."""

    name = "catalog"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str | Path:
        if isinstance(value, Path):
            return value
        try:
            return catalog_target(str(value))
        except BadValueError as exc:
            self.fail(str(exc), param, ctx)


if TYPE_CHECKING:
    _TextType = click.ParamType[str]
else:
    _TextType = click.ParamType


class _Named(_TextType):
    """Text an option takes that names something (a URL, a checkpoint, a job, a flow): given
    empty or blank (``--url "$URL"`` with the variable unset), a bad value, never "not given",
    which would quietly do the other thing (deliver to the default backend, dump to stdout)."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if not str(value).strip():
            optional = isinstance(param, click.Option) and not param.required
            self.fail("it is empty; give a value" + (", or leave the option out" if optional else ""), param, ctx)
        return str(value)


NAMED = _Named()


class _Url(_Named):
    """An http:// or https:// address an option takes (a backend's, an API's): another scheme, no
    host, a port out of range, a bad value (exit 2), as an empty one is."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = super().convert(value, param, ctx)
        problem = url_problem(text)
        if problem is not None:
            self.fail(f"{text!r} is no http:// or https:// address: {problem}", param, ctx)
        return text


URL = _Url()


class _Path(click.Path):
    """A path a command takes: an empty one is a bad value (it would be the current folder)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str | bytes) and not value:
            self.fail("it is empty; give a path", param, ctx)
        return super().convert(value, param, ctx)


def given_path(
    *,
    exists: bool = False,
    file_okay: bool = True,
    dir_okay: bool = True,
    readable: bool = True,
    allow_dash: bool = False,
    path_type: type[Any] | None = None,
) -> click.Path:
    """A ``click.Path`` (with its options) that refuses an empty path."""
    return _Path(
        exists=exists,
        file_okay=file_okay,
        dir_okay=dir_okay,
        readable=readable,
        allow_dash=allow_dash,
        path_type=path_type,
    )


def warn_of_a_password(text: str | Path, name: str = "--catalog") -> None:
    """Say on stderr that a password given in a catalog URL on the command line (``--catalog``, or
    the argument ``name``) is seen by every user of the machine."""
    if isinstance(text, str) and url_password(text):
        where = "PGPASSWORD, a pass file (~/.pgpass or PGPASSFILE)"
        where += ", or the whole URL in OLBRIDGE_CATALOG" if name == "--catalog" else ""
        click.echo(
            f"Warning: the {name} URL holds a password, which every user of this machine can read in its process "
            f"list; give it in {where} instead",
            err=True,
        )


@attrs.define
class AppContext:
    """What the commands share: the config (loaded by ``load``, once), the catalog's path or URL
    (``--catalog``, else the config's) and the catalog, opened once."""

    load: Callable[[], Config]
    given_catalog: str | Path | None = None
    _config: Config | None = None
    _catalog: Catalog | None = None
    _resolver: Resolver | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = self.load()
        return self._config

    @property
    def catalog_path(self) -> str | Path:
        """A SQLite file, or a postgresql:// URL (maybe with a password: see catalog_name)."""
        return self.given_catalog or self.config.catalog

    @property
    def catalog_name(self) -> str:
        """The catalog as messages show it: its path, or its URL with the password masked."""
        return masked(self.catalog_path)

    def catalog(self, *, create: bool = False, migrate: bool | None = None) -> Catalog:
        """The catalog, opened once. Only commands that record something pass ``create=True``
        (``init`` and the writers); the others refuse a catalog that does not exist rather than
        make an empty one at a mistyped path. ``migrate`` (``init`` and ``migrate``) brings an
        older catalog up to date on any engine (SQLite's are anyway)."""
        if self._catalog is None:
            self._catalog = Catalog(self.catalog_path, create=create, migrate=migrate, naming=self.resolver())
            older = self._catalog.upgraded_from
            if older is not None and not migrate:  # a SQLite catalog, upgraded as any command opens it
                say(
                    f"upgraded catalog {self.catalog_name} from schema version {older} to "
                    f"{self._catalog.schema_version}: an olbridge older than this one cannot open it now"
                )
        return self._catalog

    @property
    def catalog_opened(self) -> bool:
        """Whether this command opened the catalog."""
        return self._catalog is not None

    def resolver(self) -> Resolver:
        if self._resolver is None:
            self._resolver = Resolver.load(self.config.mappings, self.config.default_namespace)
        return self._resolver

    def converter(self) -> Converter:
        options = ConvertOptions(producer=self.config.producer, job_namespace_prefix=self.config.job_namespace_prefix)
        return Converter(self.resolver(), options)

    def storage_error(self, exc: BaseException) -> CatalogError | None:
        """The CatalogError a driver's error about the catalog's storage stands for (see
        :func:`bridge.catalog.engines.storage_error`), by the open catalog's engine where there is
        one; the password of the catalog's URL masked in it either way (a driver's message may
        hold the URL)."""
        found = self._catalog.engine.storage_error(exc) if self._catalog is not None else None
        if found is None:
            found = storage_error(exc, self.catalog_name)
        password = url_password(self.catalog_path)
        if found is not None and password and password in str(found):
            return CatalogError(str(found).replace(password, "***"))
        return found

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None

    def discard_new_catalog(self) -> None:
        """After a command's error: a catalog it made that holds nothing (its input refused at the
        first write) is taken away again (:meth:`Catalog.discard`)."""
        if self._catalog is not None and self._catalog.discard():
            self._catalog = None


HELP_ASKED = "olbridge.help"  # ctx.meta: the command line holds --help (or -h) for a command


class BadValue(click.ClickException):
    """A BadValueError, as click reports it: ``Error: ...`` and exit status 2 (a usage error)."""

    exit_code = 2


P = ParamSpec("P")
R = TypeVar("R")


def pass_app(fn: Callable[Concatenate[AppContext, P], R]) -> Callable[P, R]:
    """Pass the run's :class:`AppContext` as a command's first argument (``app: AppContext``),
    once the command line's text is known to be UTF-8 (:func:`refuse_undecodable`)."""
    passed = click.make_pass_decorator(AppContext)(fn)

    @functools.wraps(passed)
    def command(*args: P.args, **kwargs: P.kwargs) -> R:
        refuse_undecodable(click.get_current_context())
        refuse_empty_variables(click.get_current_context())
        return passed(*args, **kwargs)

    return command


def refuse_undecodable(ctx: click.Context) -> None:
    """Refuse, as a bad value (exit status 2, before anything is done), an argument or option of
    the command line (or of the environment) that is not UTF-8 text: Python hands such bytes on
    as lone surrogates (``caf\\xe9`` as ``caf\\udce9``), which no catalog, output or request can
    carry. A file's path is taken as it is: the file system has its names as bytes."""
    at: click.Context | None = ctx
    while at is not None:
        for param in at.command.params:
            if isinstance(param.type, click.Path | click.File) or param.name is None:
                continue
            for text in _texts(at.params.get(param.name)):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    name = max(param.opts, key=len) if isinstance(param, click.Option) else param.human_readable_name
                    where = _first_bad(text, exc.start)
                    raise BadValue(f"{name}: not UTF-8 text ({where}); olbridge reads its arguments as UTF-8") from None
        at = at.parent


# olbridge's own variables (those of other tools, OpenLineage's and Prefect's, are read as those
# tools read them: an empty one is not set)
OWN_VARIABLES = "OLBRIDGE_"


def refuse_empty_variables(ctx: click.Context) -> None:
    """Refuse, as a bad value, an option's environment variable that is set but empty where the
    command line does not give the option: click takes it for not set, so that a secret missing
    from a deployment's environment (``OLBRIDGE_TOKEN=``) started a receiver anyone could write
    to. An unset variable is not taken for "not given", as an empty option is not."""
    at: click.Context | None = ctx
    while at is not None:
        for param in at.command.params:
            variable = param.envvar if isinstance(param, click.Option) else None
            if not isinstance(variable, str) or not variable.startswith(OWN_VARIABLES) or param.name is None:
                continue
            if (
                os.environ.get(variable) == ""
                and at.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE
            ):
                name = max(param.opts, key=len)
                raise BadValue(f"{variable} is set but empty (for {name}): give it a value, or unset it")
        at = at.parent


def _first_bad(text: str, start: int) -> str:
    """Where the first byte that is not UTF-8 is in ``text`` (it and what is before it, as the
    command line gave them), and what it is."""
    char = text[start]
    offset = len(text[:start].encode("utf-8")) + 1  # (what is before it is UTF-8)
    if "\udc80" <= char <= "\udcff":  # a byte as Python's file system encoding hands it on
        return f"byte {offset} is 0x{ord(char) - 0xDC00:02x}"
    return f"character {start + 1} is U+{ord(char):04X}, a lone surrogate"


def _texts(value: Any) -> Iterator[str]:
    """The strings of a parameter's value (a tuple's, for options given more than once)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _texts(item)


ROOT_OPTIONS = ("--catalog", "--config")  # the root group's: given before any command


def _of_options(exc: BridgeError) -> bool:
    """Whether an error is of the values of a command's options alone (each problem where an
    option's name says: ``--start``, ``--input[0].id``)."""
    if isinstance(exc, ValidationProblems):
        return all(_of_options(p) for p in exc.problems)
    # a file's own place is its name, which may begin with "--" (given after "--")
    if not isinstance(exc, ValidationError) or isinstance(exc, InputFileError):
        return False
    return exc.where.startswith("--") or exc.where in ARGUMENTS


# the commands' arguments a problem of their value is placed at (as an option's, by its name)
ARGUMENTS = frozenset({"ASSET_ID"})


class BridgeGroup(click.Group):
    """A group that turns library errors into click errors, once for every command below it (the
    root group's own callback included): a BridgeError, and a database error that says the
    catalog's storage is in the way (SQLite: a read-only or damaged file, a full disk, a lock held
    too long; PostgreSQL: a server that cannot be reached, a login refused, privileges missing).
    Any other exception is a fault and keeps its traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        if ctx.parent is None:  # the root: whether the command line asks a command's help
            # click 8.2 keeps the subcommand's arguments in _protected_args (protected_args, before)
            protected = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args
            rest = [*protected, *ctx.args]
            before = rest[: rest.index("--")] if "--" in rest else rest  # after "--": arguments, not options
            ctx.meta[HELP_ASKED] = "--help" in before or "-h" in before
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:  # olbridge's own option given after a command
            below = exc.ctx is not None and exc.ctx.parent is not None
            if below and exc.option_name in ROOT_OPTIONS:  # not click's near match: the one meant
                assert exc.ctx is not None
                names, at = [], exc.ctx
                while at.parent is not None:  # the command's words, whatever started olbridge
                    names.append(at.info_name or "")
                    at = at.parent
                name, command = exc.option_name, " ".join(reversed(names))
                where = f"before the command: olbridge {name} ... {command} ..."
                message = f"{exc.message[:-1]}: {name} is olbridge's own, {where}"
                raise click.NoSuchOption(name, message, ctx=exc.ctx) from None
            raise
        except BridgeError as exc:
            app = ctx.obj if isinstance(ctx.obj, AppContext) else None
            message = str(exc)
            if isinstance(exc, NotInCatalog) and app is not None and app.catalog_opened:
                message += f" (catalog {app.catalog_name})"  # which one was looked in: not the one meant, maybe
            if app is not None:
                app.discard_new_catalog()
            # a value a command cannot take, or one of its options' (a ValidationError where an
            # option's name says): a usage error, nothing done
            if isinstance(exc, BadValueError) or _of_options(exc):
                raise BadValue(message) from exc
            raise click.ClickException(message) from exc
        except (click.exceptions.Exit, click.ClickException, click.Abort):  # click's own: help, usage
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated) where no command set its own handler
            app = ctx.obj if isinstance(ctx.obj, AppContext) else None
            if app is not None:
                app.discard_new_catalog()
            name = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"
            raise click.ClickException(
                f"interrupted ({name}) before the end: a write not yet committed was rolled back, and nothing after "
                "it done"
            ) from None
        except Exception as exc:
            app = ctx.obj if isinstance(ctx.obj, AppContext) else None
            error = app.storage_error(exc) if app else storage_error(exc, "")
            said = str(error) if error is not None else operational(exc)
            if said is None:
                raise
            raise click.ClickException(said) from exc


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, as Ctrl-C raises KeyboardInterrupt (see
    :func:`terminate_as_interrupt`): a command stopped so says so, rather than die silently."""


def terminate_as_interrupt() -> None:
    """SIGTERM raises :class:`Terminated` in the main thread (the commands that stop on it in
    their own way, ``stream``, ``serve``, ``export``..., set their own handler meanwhile)."""

    def raised(signum: int, frame: object) -> None:
        raise Terminated

    signal.signal(signal.SIGTERM, raised)


def operational(exc: Exception) -> str | None:
    """What an error of the machine's says (a file that cannot be read for want of permission, a
    full disk under stdout; a JSON value nested deeper than Python reads), where no code nearer
    it did: None for anything else, a fault. A broken pipe is left to click (a reader that went
    away, say ``| head``: quiet)."""
    if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        return f"{exc.filename}: {reason}" if exc.filename is not None else reason
    if isinstance(exc, RecursionError):
        return "a JSON value (or another input) is nested too deeply to read"
    return None
