"""The rules of identifiers: asset ids (their name and URI forms), namespaces, and the parts of a
task run's key. Each is a validator that raises :class:`~bridge.errors.ValidationError` naming the
rule and the offending value."""

from __future__ import annotations

import enum
import re
import unicodedata

from bridge.errors import ValidationError

ID_NAME_MAX = 150
ID_URI_MAX = 512
_ID_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_URI_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_URI_FORBIDDEN = set("<>#?%")


class IdForm(enum.StrEnum):
    NAME = "name"
    URI = "uri"


def _check_length(value: str, most: int, what: str, rule: str, where: str) -> None:
    """A ValidationError under ``rule`` if ``value`` is longer than ``most`` characters."""
    if len(value) > most:
        raise ValidationError(
            f"{what} has at most {most} characters, this one has {len(value)}", rule=rule, value=value, where=where
        )


def id_form(asset_id: object, where: str = "id", *, lookup: bool = False) -> IdForm:
    """Check an asset id and tell which of the two forms it has.

    Name form (Kestra): letters, digits, ``.``, ``_``, ``:``, ``-``, first character a letter or a
    digit, at most 150 characters. URI form (Prefect): ``scheme://...``, at most 512 characters, no
    whitespace and none of ``< > # ? %``.
    """
    if not isinstance(asset_id, str) or not asset_id:
        raise ValidationError("an asset id must be a non-empty string", rule="id.required", value=asset_id, where=where)
    scheme = _URI_SCHEME_RE.match(asset_id)
    if scheme:
        _check_length(asset_id, ID_URI_MAX, "a URI-form id", "id.uri.length", where)
        rest = asset_id[scheme.end() :]
        if not rest:
            raise ValidationError(
                f"a URI-form id needs something after '{scheme.group(0)}': {asset_id!r}",
                rule="id.uri.empty",
                value=asset_id,
                where=where,
            )
        userinfo, at, _ = rest.partition("/")[0].rpartition("@")
        # every event would carry it: in its namespace, its symlinks (one recorded before this
        # rule is still found by it, with ``lookup``: to be deleted or purged)
        if at and ":" in userinfo and not lookup:
            raise ValidationError(
                f"a URI-form id may not hold a password (user:password@ before the host): {scheme.group(0)}"
                "***@...; name the asset without it",
                rule="id.uri.password",
                value=None,
                where=where,
            )
        bad = sorted({c for c in asset_id if c.isspace() or c in _URI_FORBIDDEN or not c.isprintable()})
        if bad:
            shown = ", ".join(repr(c) for c in bad)
            raise ValidationError(
                f"a URI-form id may not contain whitespace or any of < > # ? %; found {shown} in {asset_id!r}",
                rule="id.uri.characters",
                value=asset_id,
                where=where,
            )
        return IdForm.URI
    _check_length(asset_id, ID_NAME_MAX, "a name-form id", "id.name.length", where)
    if not _ID_NAME_RE.fullmatch(asset_id):
        raise ValidationError(
            "a name-form id has only letters, digits, '.', '_', ':' and '-', and starts with a letter "
            f"or digit (or is a URI such as s3://bucket/key): {asset_id!r}",
            rule="id.name.characters",
            value=asset_id,
            where=where,
        )
    return IdForm.NAME


def is_uri_id(asset_id: str) -> bool:
    """Whether an id (already checked) has the URI form."""
    return _URI_SCHEME_RE.match(asset_id) is not None


def check_id(asset_id: object, where: str = "id", *, lookup: bool = False) -> str:
    id_form(asset_id, where, lookup=lookup)
    assert isinstance(asset_id, str)
    return asset_id


def slugify(text: str, max_length: int = ID_NAME_MAX) -> str:
    """A valid name-form id built from free text: ``"Sales Report (EU) 2025"`` → ``sales-report-eu-2025``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9._:-]+", "-", ascii_text)
    slug = re.sub(r"-{2,}", "-", slug).strip("-._:")
    slug = slug[:max_length].rstrip("-._:")
    if not slug:
        raise ValidationError(
            f"cannot build an id from {text!r}: nothing usable is left", rule="id.slugify", value=text
        )
    return slug


# ---------------------------------------------------------------------------------------------
# namespaces

NAMESPACE_MAX = 150
_NAMESPACE_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")


def check_namespace(value: object, where: str = "namespace") -> str | None:
    """A namespace, or None for a Global asset."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError("a namespace must be a string", rule="namespace.type", value=value, where=where)
    _check_length(value, NAMESPACE_MAX, "a namespace", "namespace.length", where)
    if not _NAMESPACE_RE.fullmatch(value):
        raise ValidationError(
            f"a namespace matches [a-z0-9][a-z0-9._-]* (lower case, digits, '.', '_', '-'): {value!r}",
            rule="namespace.characters",
            value=value,
            where=where,
        )
    return value


# ---------------------------------------------------------------------------------------------
# task run keys


def check_key_part(value: object, where: str, max_length: int = 512) -> str:
    """A part of a task run's key (flow id, task id, execution id ...): a non-empty printable string."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("must be a non-empty string", rule="key.required", value=value, where=where)
    if len(value) > max_length or not value.isprintable():
        raise ValidationError(
            f"must be printable and at most {max_length} characters", rule="key.characters", value=value, where=where
        )
    return value
