"""bridge.config: every key of olbridge.toml, the keys and values it refuses, and which of the
command line, the environment, the file and the defaults wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from bridge.cli import cli
from bridge.config import (
    CONFIG_FILE,
    Config,
    HealthConfig,
    NamedToken,
    RetentionConfig,
    ServeConfig,
    load_config,
    load_tokens,
    parse_config,
    read_secret_file,
)
from bridge.errors import BadValueError, ConfigError
from bridge.mapping.resolver import DEFAULT_NAMESPACE
from bridge.model.alerts import AlertRule
from bridge.model.health import FreshnessRule, Match, Selector
from bridge.version import PRODUCER
from tests.conftest import ROOT

ALERT_URL = "https://hooks.example/T000"

EVERY_KEY = """\
catalog = "state/olbridge.db"
mappings = ["rules/warehouse.toml", "/etc/olbridge/lake.toml"]
default_namespace = "company.lake"
job_namespace_prefix = "prod."
producer = "https://example.com/olbridge/1.0"

[serve]
forward = true
tokens = "secrets/tokens.toml"
access_log = "json"

[retention]
received_events = "7d"
checks = "30d"
every = "15m"

[[freshness]]
match = { namespace = "team-a", type = "Table", id_prefix = "warehouse.", metadata = { tier = "gold" } }
max = "24h"
warn = "6h"

[[alerts]]
name = "marts"
match = { namespace = "team-a" }
on = ["FAIL", "RECOVERED"]
webhook = "https://hooks.example/T000"

[health]
every = "10m"
web_url = "https://olbridge.example"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_defaults() -> None:
    config = parse_config({}, "olbridge.toml", Path("/anywhere"))
    assert config == Config()
    assert (config.catalog, config.mappings, config.default_namespace) == (Path("olbridge.db"), (), DEFAULT_NAMESPACE)
    assert (config.job_namespace_prefix, config.producer, config.source) == ("", PRODUCER, None)


def test_every_key_is_read_and_relative_paths_are_the_files_folder(tmp_path: Path) -> None:
    file = write(tmp_path / "conf" / CONFIG_FILE, EVERY_KEY)
    config = load_config(file, {})
    assert config == Config(
        catalog=tmp_path / "conf" / "state" / "olbridge.db",
        mappings=(tmp_path / "conf" / "rules" / "warehouse.toml", Path("/etc/olbridge/lake.toml")),
        default_namespace="company.lake",
        job_namespace_prefix="prod.",
        producer="https://example.com/olbridge/1.0",
        serve=ServeConfig(forward=True, tokens_file=tmp_path / "conf" / "secrets" / "tokens.toml", access_log="json"),
        retention=RetentionConfig(received_events=7 * 86400.0, checks=30 * 86400.0, every=900.0),
        freshness=(
            Selector(
                Match(namespace="team-a", type="Table", id_prefix="warehouse.", metadata={"tier": "gold"}),
                FreshnessRule(max=timedelta(hours=24), warn=timedelta(hours=6), source="[[freshness]] #1"),
            ),
        ),
        alerts=(AlertRule("marts", Match(namespace="team-a"), frozenset({"FAIL", "RECOVERED"}), ALERT_URL),),
        health=HealthConfig(every=600.0, web_url="https://olbridge.example", watch=True),
        source=file,
    )
    # every key of the file is a field of Config, and every field but source is a key
    assert {f.name for f in attrs.fields(Config)} - {"source"} == set(tomllib.loads(EVERY_KEY))


def test_unknown_keys_are_refused_and_the_known_ones_named() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({"catalog": "a.db", "catalogue": "b.db", "Producer": "x"}, "olbridge.toml", Path("."))
    assert str(refused.value) == (
        "olbridge.toml: unknown setting(s) Producer, catalogue; "
        "known: alerts, catalog, default_namespace, freshness, health, job_namespace_prefix, mappings, producer, "
        "retention, serve"
    )
    with pytest.raises(ConfigError, match=r"unknown setting.*source"):
        parse_config({"source": "x.toml"}, "olbridge.toml", Path("."))  # a field, not a key


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"catalog": 1}, "'catalog' must be a string, not 1"),
        ({"catalog": ["a.db"]}, "'catalog' must be a string, not ['a.db']"),
        ({"mappings": "rules.toml"}, "'mappings' must be a list of file paths"),
        ({"mappings": ["rules.toml", 2]}, "'mappings' must be a list of file paths"),
        ({"default_namespace": True}, "'default_namespace' must be a string, not True"),
        ({"default_namespace": ""}, "'default_namespace' '' is not a namespace Marquez takes"),
        ({"default_namespace": "a b"}, "'default_namespace' 'a b' is not a namespace Marquez takes"),
        ({"default_namespace": "a;b"}, "is not a namespace Marquez takes"),
        ({"default_namespace": "n" * 1025}, "is not a namespace Marquez takes"),
        ({"job_namespace_prefix": 3}, "'job_namespace_prefix' must be a string, not 3"),
        ({"job_namespace_prefix": "prod "}, "'job_namespace_prefix' 'prod ' has characters Marquez refuses"),
        ({"job_namespace_prefix": "é"}, "'é' has characters Marquez refuses in namespaces ('é'; it takes A-Z"),
        ({"job_namespace_prefix": "p" * 875}, "'job_namespace_prefix' has 875 characters; at most 874"),
        ({"producer": "http://x\u0000y"}, "'producer' must be an absolute URI"),
        ({"producer": "http://x/a#b#c"}, "'producer' must be an absolute URI"),
        ({"producer": "http://x/%zz"}, "'producer' must be an absolute URI"),
        ({"producer": "http://exämple.com/"}, "'producer' must be an absolute URI"),
        ({"producer": {"url": "x"}}, "'producer' must be a string"),
        ({"producer": "olbridge"}, "'producer' must be an absolute URI, not 'olbridge'"),
        ({"producer": "https://example.com/a b"}, "'producer' must be an absolute URI"),
        ({"serve": True}, "'serve' must be a table ([serve])"),
        ({"serve": {"forwards": True}}, "[serve]: unknown setting(s) forwards; known: access_log, forward, tokens"),
        ({"serve": {"access_log": True}}, '[serve]: \'access_log\' must be "text", "json" or "off", not True'),
        ({"serve": {"access_log": "JSON"}}, '\'access_log\' must be "text", "json" or "off", not \'JSON\''),
        ({"serve": {"forward": "yes"}}, "[serve]: 'forward' must be true or false, not 'yes'"),
        ({"serve": {"tokens": ["a"]}}, "[serve]: 'tokens' is a tokens file's path or [serve.tokens.<name>] tables"),
        ({"serve": {"tokens": {}}}, "no tokens: give one table per token name"),
        ({"serve": {"tokens": {"a b": {}}}}, "token name 'a b': letters, digits"),
        ({"serve": {"tokens": {"spark": "t"}}}, "'spark' must be a table holding token and namespaces"),
        ({"serve": {"tokens": {"spark": {"token": "t", "namespaces": ["x"], "ns": 1}}}}, "unknown key(s) ns"),
        ({"serve": {"tokens": {"spark": {"namespaces": ["x"]}}}}, "[spark]: 'token' must be a non-empty string"),
        ({"serve": {"tokens": {"spark": {"token": "a b", "namespaces": ["x"]}}}}, "may not hold spaces"),
        ({"serve": {"tokens": {"spark": {"token": "t"}}}}, "[spark]: 'namespaces' must be a non-empty list"),
        ({"serve": {"tokens": {"spark": {"token": "t", "namespaces": []}}}}, "'namespaces' must be a non-empty"),
        ({"serve": {"tokens": {"spark": {"token": "t", "namespaces": [""]}}}}, "'namespaces' must be a non-empty"),
        (
            {"serve": {"tokens": {"a": {"token": "t", "namespaces": ["x"]}, "b": {"token": "t", "namespaces": ["y"]}}}},
            "[a] and [b] hold the same token",
        ),
    ],
)
def test_bad_values_are_refused(document: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(document, "olbridge.toml", Path("."))
    assert str(refused.value).startswith("olbridge.toml: ")
    assert message in str(refused.value)


def test_named_tokens_inline_or_in_a_file(tmp_path: Path) -> None:
    table = {
        "spark": {"token": "s3cret", "namespaces": ["spark-*", "etl"]},
        "dbt": {"token": "t2", "namespaces": ["*"]},
    }
    config = parse_config({"serve": {"tokens": table}}, "olbridge.toml", Path("."))
    spark, dbt = config.serve.tokens or ()
    assert (spark.name, spark.namespaces, dbt.name) == ("spark", ("spark-*", "etl"), "dbt")
    assert spark.may_write("spark-prod") and spark.may_write("etl")
    assert not spark.may_write("etl2") and not spark.may_write("airflow") and not spark.may_write("Spark-prod")
    assert dbt.may_write("anything")
    assert "s3cret" not in repr(spark)  # the secret stays out of reprs and logs
    file = write(tmp_path / "tokens.toml", '[spark]\ntoken = "s3cret"\nnamespaces = ["spark-*", "etl"]\n')
    assert load_tokens(file) == (NamedToken("spark", "s3cret", ("spark-*", "etl")),)
    with pytest.raises(ConfigError, match=r"cannot read tokens file .*missing.toml"):
        load_tokens(tmp_path / "missing.toml")


def test_the_longest_namespace_marquez_takes_is_taken() -> None:
    assert parse_config({"default_namespace": "n" * 1024}, "f", Path(".")).default_namespace == "n" * 1024


def test_serve_forward_is_off_unless_set_whether_tokens_are_given_or_not() -> None:
    tokens = {"spark": {"token": "t", "namespaces": ["x"]}}
    for serve, forward in (
        ({}, False),
        ({"forward": True}, True),
        ({"tokens": tokens}, False),
        ({"tokens": tokens, "forward": True}, True),
        ({"tokens": "tokens.toml", "forward": True}, True),
    ):
        assert parse_config({"serve": serve}, "f", Path(".")).serve.forward is forward, serve


def test_a_postgresql_catalog_url_is_kept_as_written_and_a_path_is_the_files_folder() -> None:
    for url in ("postgresql://olbridge@db:5432/catalog", "postgres://db/catalog?schema=lineage"):
        assert parse_config({"catalog": url}, "f", Path("/etc/olbridge")).catalog == url
    assert parse_config({"catalog": "pg.db"}, "f", Path("/etc/olbridge")).catalog == Path("/etc/olbridge/pg.db")


def test_a_limit_past_what_the_receiver_can_hold_to_is_refused_with_the_config() -> None:
    """Refused as the config is read, naming the file, before any command (was when serve started)."""
    assert parse_config({"serve": {"max_depth": 254}}, "f", Path(".")).serve.limits == {"max_depth": 254}
    with pytest.raises(ConfigError, match=r"^f: \[serve\]: 'max_depth' is 1000, more than 254, the most it can be$"):
        parse_config({"serve": {"max_depth": 1000}}, "f", Path("."))


def test_several_unknown_keys_are_each_named() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({"serve": {"forwards": True, "token": "x"}}, "f", Path("."))
    assert str(refused.value) == (
        "f: [serve]: unknown setting(s) forwards, token; known: access_log, forward, tokens, max_body, "
        "max_gunzipped, max_batch, max_datasets, max_column_edges, max_values, max_depth, max_request_line, "
        "max_header, max_headers, max_in_flight, max_connections"
    )
    with pytest.raises(ConfigError) as refused:
        parse_config(
            {"serve": {"tokens": {"spark": {"token": "t", "namespaces": ["x"], "ns": 1, "b": 2}}}}, "f", Path(".")
        )
    assert str(refused.value) == "f: [serve.tokens]: [spark]: unknown key(s) b, ns; known: token, namespaces"


@pytest.mark.parametrize("namespace", ["company.lake", "XYZ", "s3://bucket/X", "hive://metastore:9083"])
def test_namespaces_marquez_takes_are_taken(namespace: str) -> None:
    assert parse_config({"default_namespace": namespace}, "f", Path(".")).default_namespace == namespace


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"catalog = ", "not valid TOML"),
        (b'catalog = "\xff.db"', "not UTF-8 text"),
    ],
)
def test_a_file_that_cannot_be_read(tmp_path: Path, content: bytes, message: str) -> None:
    file = tmp_path / CONFIG_FILE
    file.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_config(file, {})


def test_which_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(None, {}) == Config()  # no file anywhere: the defaults
    here = write(tmp_path / CONFIG_FILE, 'default_namespace = "here"\n')
    from_env = write(tmp_path / "env.toml", 'default_namespace = "env"\n')
    named = write(tmp_path / "named.toml", 'default_namespace = "named"\n')
    assert load_config(None, {}).default_namespace == "here"  # ./olbridge.toml when present
    assert load_config(None, {}).source == Path(CONFIG_FILE)
    assert load_config(None, {"OLBRIDGE_CONFIG": str(from_env)}).default_namespace == "env"
    assert load_config(named, {"OLBRIDGE_CONFIG": str(from_env)}).default_namespace == "named"
    with pytest.raises(BadValueError, match="OLBRIDGE_CONFIG is set but empty"):  # not taken for unset
        load_config(None, {"OLBRIDGE_CONFIG": ""})
    assert load_config(named, {"OLBRIDGE_CONFIG": ""}).default_namespace == "named"  # not read
    assert here.exists()


def test_a_named_file_that_is_missing_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / CONFIG_FILE, "")  # not used in its place
    for path, env in [(tmp_path / "missing.toml", {}), (None, {"OLBRIDGE_CONFIG": str(tmp_path / "missing.toml")})]:
        with pytest.raises(ConfigError, match=r"cannot read config file .*missing.toml: No such file"):
            load_config(path, env)


# --- through the command line -----------------------------------------------------------------

Init = Callable[[list[str], dict[str, str]], tuple[int, Any, str]]


@pytest.fixture
def init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Init:
    """``olbridge ARGS init`` in a folder of its own, with only the given OLBRIDGE_* variables set."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)

    def run(args: list[str], env: dict[str, str]) -> tuple[int, Any, str]:
        variables: dict[str, str | None] = {"OLBRIDGE_CATALOG": None, "OLBRIDGE_CONFIG": None, **env}
        result = CliRunner(env=variables).invoke(cli, [*args, "init"])
        return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else None, result.stderr

    return run


def test_the_catalog_flag_beats_the_environment_which_beats_the_file(tmp_path: Path, init: Init) -> None:
    conf = write(tmp_path / "conf" / "olbridge.toml", 'catalog = "from-file.db"\n')
    flag, env = str(tmp_path / "from-flag.db"), str(tmp_path / "from-env.db")
    assert init(["--config", str(conf), "--catalog", flag], {"OLBRIDGE_CATALOG": env})[1]["catalog"] == flag
    assert init(["--config", str(conf)], {"OLBRIDGE_CATALOG": env})[1]["catalog"] == env
    assert init(["--config", str(conf)], {})[1]["catalog"] == str(tmp_path / "conf" / "from-file.db")
    assert init([], {})[1]["catalog"] == "olbridge.db"  # the default, in the working folder


def test_the_config_flag_beats_the_environment(tmp_path: Path, init: Init) -> None:
    by_flag = write(tmp_path / "flag.toml", 'catalog = "flag.db"\n')
    by_env = write(tmp_path / "env.toml", 'catalog = "env.db"\n')
    _, out, _ = init(["--config", str(by_flag)], {"OLBRIDGE_CONFIG": str(by_env)})
    assert out["catalog"] == str(tmp_path / "flag.db")
    _, out, _ = init([], {"OLBRIDGE_CONFIG": str(by_env)})
    assert out["catalog"] == str(tmp_path / "env.db")


def test_a_bad_config_is_an_error_before_any_command_runs(tmp_path: Path, init: Init) -> None:
    conf = write(tmp_path / "olbridge.toml", 'catalog = "c.db"\ncolour = "red"\n')
    code, _, err = init([], {"OLBRIDGE_CONFIG": str(conf)})
    assert code == 1
    assert err == f"Error: {conf}: unknown setting(s) colour; known: alerts, catalog, default_namespace, " + (
        "freshness, health, job_namespace_prefix, mappings, producer, retention, serve\n"
    )
    assert not (tmp_path / "c.db").exists()


def test_the_settings_reach_the_events(tmp_path: Path) -> None:
    conf = write(
        tmp_path / "olbridge.toml",
        'default_namespace = "company.lake"\njob_namespace_prefix = "prod."\n'
        'producer = "https://example.com/olbridge/1.0"\n',
    )
    db = str(tmp_path / "c.db")
    base = ["--config", str(conf), "--catalog", db]
    runner = CliRunner()
    run = ["--namespace", "ops", "--flow-id", "f", "--task-id", "t", "--execution-id", "e"]
    run += ["--start", "2025-01-01T00:00Z"]
    report = '{"id": "report.daily", "type": "Table"}'
    recorded = runner.invoke(cli, [*base, "record", *run, "--input", "raw.orders", "--output", report])
    assert recorded.exit_code == 0, recorded.output
    events = [json.loads(line) for line in runner.invoke(cli, [*base, "export"]).stdout.splitlines()]
    assert events and {e["producer"] for e in events} == {"https://example.com/olbridge/1.0"}
    assert {e["job"]["namespace"] for e in events} == {"prod.ops"}
    datasets = {(d["namespace"], d["name"]) for e in events for d in [*e["inputs"], *e["outputs"]]}
    assert datasets == {("company.lake", "raw.orders"), ("company.lake", "report.daily")}  # no rule names them


def test_a_prefix_and_a_producer_the_config_takes_make_valid_events(tmp_path: Path) -> None:
    """Whatever ``job_namespace_prefix`` and ``producer`` the config takes, at the edges of what
    it takes, the events olbridge exports are valid (the spec's and Marquez's rules, as
    ``validate`` checks them): what they refuse is refused at start-up instead."""
    prefix = ("Az09_-.:/@+" * 80)[:874]
    producer = "https://example.com/a-b_c~d/!$&'()*+,;=:@%20?x=[1]#f"
    conf = write(tmp_path / "olbridge.toml", f'job_namespace_prefix = "{prefix}"\nproducer = "{producer}"\n')
    db = str(tmp_path / "c.db")
    base = ["--config", str(conf), "--catalog", db]
    runner = CliRunner()
    run = ["--namespace", "n" * 150, "--flow-id", "f", "--task-id", "t", "--execution-id", "e"]
    run += ["--start", "2025-01-01T00:00Z", "--output", '{"id": "report.daily", "type": "Table"}']
    assert runner.invoke(cli, [*base, "record", *run]).exit_code == 0
    assert runner.invoke(cli, [*base, "export", "--output", str(tmp_path / "events.ndjson")]).exit_code == 0
    events = [json.loads(line) for line in (tmp_path / "events.ndjson").read_text().splitlines()]
    assert {e["job"]["namespace"] for e in events if "job" in e} == {prefix + "n" * 150}
    checked = runner.invoke(cli, ["validate", str(tmp_path / "events.ndjson")])
    assert checked.exit_code == 0 and f"{len(events)} valid, 0 invalid" in checked.stderr, checked.output


def test_files_are_read_as_utf_8_whatever_the_locale(tmp_path: Path) -> None:
    """A config file and a secret file are UTF-8 text, read as such in a process whose locale
    says ASCII (no UTF-8 mode, no locale coercion): not as the locale's encoding."""
    write(tmp_path / CONFIG_FILE, 'default_namespace = "café.lake"\n')
    write(tmp_path / "secret", "tökén\n")
    assert load_config(tmp_path / CONFIG_FILE, {}).default_namespace == "café.lake"  # here, UTF-8 mode or not
    assert read_secret_file(tmp_path / "secret", "--token-file") == "tökén"
    script = (
        "import sys, locale; from pathlib import Path; from bridge.config import load_config, read_secret_file;"
        "assert locale.getpreferredencoding(False) != 'UTF-8', locale.getpreferredencoding(False);"
        f"print(load_config(Path({str(tmp_path / CONFIG_FILE)!r}), {{}}).default_namespace.encode().hex(),"
        f" read_secret_file(Path({str(tmp_path / 'secret')!r}), '--token-file').encode().hex())"
    )
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["café.lake".encode().hex(), "tökén".encode().hex()]


def test_an_empty_catalog_is_refused_not_taken_for_the_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'catalog' must be a SQLite file or a postgresql:// URL, not ''"):
        parse_config({"catalog": ""}, "f", Path("."))
    result = CliRunner().invoke(cli, ["--catalog", "", "status"])
    assert result.exit_code == 2 and "catalog: the name is empty" in result.stderr, result.output


@pytest.mark.parametrize(
    ("mapping", "said"),
    [("[[rules]]\nmatch = 'x'\n", "unknown key(s) rules"), (None, "file not found")],
)
@pytest.mark.parametrize(
    "command",
    [["status"], ["record", "--namespace", "ops", "--flow-id", "f", "--task-id", "t", "--execution-id", "e"]],
)
def test_a_bad_mapping_file_is_an_error_before_any_command_runs(
    tmp_path: Path, mapping: str | None, said: str, command: list[str]
) -> None:
    """The mapping files the config names are read and checked at start-up with the rest of it:
    a command that did not use them (``status``) or used them later (``record``, which queued
    events and then ``export`` failed on them) stops at once, and writes nothing."""
    if mapping is not None:
        write(tmp_path / "m.toml", mapping)
    conf = write(tmp_path / "olbridge.toml", 'mappings = ["m.toml"]\n')
    db = tmp_path / "c.db"
    result = CliRunner().invoke(cli, ["--config", str(conf), "--catalog", str(db), *command])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert result.stderr.startswith("Error: ") and f"{tmp_path / 'm.toml'}" in result.stderr, result.stderr
    assert said in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not db.exists()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('catalog = "a\\u0000b"\n', "'catalog' holds a NUL character (character 2)"),
        ('catalog = "postgresql://u:secret@h/a\\u0000b"\n', "'catalog' holds a NUL character (character 26)"),
        ('mappings = ["m.toml", "a\\u0000b"]\n', "'mappings' #2 holds a NUL character (character 2)"),
        ('[serve]\ntokens = "a\\u0000b"\n', "[serve]: 'tokens' holds a NUL character (character 2)"),
    ],
)
@pytest.mark.parametrize("command", [["init"], ["assets", "list"], ["serve", "--port", "0"], ["ui", "--port", "0"]])
def test_a_nul_in_a_path_of_the_config_is_refused_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, said: str, command: list[str]
) -> None:
    """A path (or URL) the config gives that holds a NUL is refused when the config is read,
    naming its key, whatever the command: not a ``ValueError: embedded null byte`` traceback when
    it is opened, nor ``no catalog at a<NUL>b``. The URL itself is not said (it may hold a
    password)."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "m.toml", "")
    conf = write(tmp_path / "olbridge.toml", text)
    result = CliRunner().invoke(cli, ["--config", str(conf), *command])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert result.stderr == f"Error: {conf}: {said}, which no path or URL may hold\n"
    assert "secret" not in result.stderr
    assert sorted(tmp_path.iterdir()) == [tmp_path / "m.toml", conf]  # no catalog made
