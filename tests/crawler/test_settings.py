"""crawler.settings and crawler.seeds: validation and error messages naming the input."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from crawler.errors import ConfigError
from crawler.seeds import parse_seeds, read_seeds
from crawler.settings import Settings


def test_defaults_are_polite() -> None:
    s = Settings()
    assert (s.per_host, s.delay, s.scope, s.db) == (2, 1.0, "host", "crawl.db")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"concurrency": 0}, "--concurrency"),
        ({"per_host": -1}, "--per-host"),
        ({"delay": -0.1}, "--delay"),
        ({"scope": "planet"}, "--scope"),
        ({"include": ("(",)}, "--include"),
        ({"max_pages": 0}, "--max-pages"),
        ({"delay": float("nan")}, "--delay: a finite number"),  # NaN passes every < test
        ({"connect_timeout": float("nan")}, "--connect-timeout: a finite number"),
        ({"timeout": float("inf")}, "--timeout: a finite number"),
        ({"max_time": float("nan")}, "--max-time: a finite number"),
        ({"concurrency": True}, "--concurrency: a whole number"),
        ({"max_pages": 1.5}, "--max-pages: a whole number"),
        ({"quiet": "yes"}, "--quiet: true or false"),
        ({"user_agent": 5}, "--user-agent: a string"),
        ({"headers": [5]}, "--header: a list of strings"),
        ({"retries": -1}, "--retries must be ≥ 0, got -1"),
    ],
)
def test_invalid_settings(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(**changes)  # type: ignore[arg-type]


def test_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('per-host = 4\ndelay = 0.25\ninclude = "/docs/"\nno-progress = true\n')
    s = Settings.from_toml(path)
    assert (s.per_host, s.delay, s.include, s.progress) == (4, 0.25, ("/docs/",), False)
    path.write_text("bogus = 1\n")
    with pytest.raises(ConfigError, match=r"c\.toml: unknown setting 'bogus'"):
        Settings.from_toml(path)
    path.write_text("per-host = [\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        Settings.from_toml(path)
    with pytest.raises(ConfigError, match="cannot read"):
        Settings.from_toml(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("delay = nan\n", "c.toml: --delay: a finite number is needed, got nan"),
        ('delay = "fast"\n', "c.toml: --delay: a finite number is needed, got 'fast'"),
        ("header = [5]\n", "c.toml: --header: a list of strings is needed"),
        ("crawl = 5\n", "c.toml: crawl = 5: [crawl] must be a table"),
        ("user_agent = 5\n", "c.toml: --user-agent: a string is needed, got 5"),
        ("concurrency = true\n", "c.toml: --concurrency: a whole number is needed"),
        ("[crawl]\nstore-body = 1\n", "c.toml: --store-body: true or false is needed"),
    ],
)
def test_a_config_value_of_the_wrong_type_is_named(tmp_path: Path, text: str, message: str) -> None:
    """A TOML file can hold any type anywhere: each is checked against the setting's, and
    the error names the file, the setting and the value (no traceback, no silent 1)."""
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        Settings.from_toml(path)
    assert message in str(refused.value) and str(refused.value).startswith(str(path))


def test_seeds_file(tmp_path: Path) -> None:
    path = tmp_path / "seeds.txt"
    path.write_text(
        "\ufeff# a comment\n\nhttp://Example.com/a#frag\n  https://b.org  # trailing\nhttp://example.com/a\n"
    )
    assert read_seeds(path) == ["http://example.com/a", "https://b.org/"]


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ("http://ok.com/\nexample.com\n", "seeds.txt:2"),
        ("ftp://x.org/\n", "seeds.txt:1"),
        ("# only\n\nhttp://\n", "seeds.txt:3"),
        ("/relative/path\n", "seeds.txt:1"),
    ],
)
def test_bad_seed_lines_name_file_and_line(tmp_path: Path, content: str, where: str) -> None:
    path = tmp_path / "seeds.txt"
    path.write_text(content)
    with pytest.raises(ConfigError, match=where):
        read_seeds(path)


def test_seed_lines_end_at_line_feeds_only_and_are_decoded_each(tmp_path: Path) -> None:
    """U+0085 or U+2028 inside a line is no line break (as for wc -l and editors): the
    numbers stay the file's; CRLF is one break; bad UTF-8 names its line."""
    path = tmp_path / "seeds.txt"
    path.write_bytes(b"http://h.com/a\xc2\x85b\r\nht!tp://x\n")
    with pytest.raises(
        ConfigError, match=r"seeds\.txt:2: not an absolute http\(s\) URL: 'ht!tp://x'"
    ):
        read_seeds(path)
    path.write_bytes(b"http://h.com/\r\nhttp://h.com/\xff\n")
    with pytest.raises(ConfigError, match=r"seeds\.txt:2: not UTF-8 text \(byte 14\)"):
        read_seeds(path)
    path.write_bytes(b"http://h.com/a\xe2\x80\xa8b\r\nhttps://h.com/c\r\n")
    assert read_seeds(path) == ["http://h.com/a%E2%80%A8b", "https://h.com/c"]


def test_a_seed_longer_than_the_url_limit_is_refused_and_shown_cut(tmp_path: Path) -> None:
    path = tmp_path / "seeds.txt"
    path.write_text("http://h.com/" + "a" * 100_000 + "\n")
    with pytest.raises(ConfigError, match=r"seeds\.txt:1: longer than --max-url-length 2048") as e:
        read_seeds(path, Settings().max_url_length)
    assert len(str(e.value)) < 400
    path.write_text("x" * 100_000 + "\n")
    with pytest.raises(ConfigError) as bad:
        read_seeds(path)
    assert len(str(bad.value)) < 400 and str(bad.value).endswith("...")


def test_missing_and_empty_seed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        read_seeds(tmp_path / "nope.txt")
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(ConfigError, match="no seed URLs"):
        read_seeds(tmp_path / "empty.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ConfigError, match=r"bin\.txt:1: not UTF-8 text"):
        read_seeds(tmp_path / "bin.txt")
    with pytest.raises(ConfigError, match="cannot read seeds file"):
        read_seeds(tmp_path)  # a folder
    assert parse_seeds(["http://a.com/"]) == ["http://a.com/"]


# -- one description per flag ------------------------------------------------------------------
def test_every_field_is_a_flag_with_a_kind_a_help_and_its_own_default() -> None:
    flags = {flag.name: flag for flag in Settings.flags()}
    config_only = {"host_headers"}  # a table: only a config file can hold it
    assert set(flags) == {f.name for f in dataclasses.fields(Settings) if f.init} - config_only
    defaults = Settings()
    for flag in flags.values():
        assert flag.help.strip().endswith("."), flag.name
        assert flag.kind in (
            "int",
            "float",
            "text",
            "duration",
            "choice",
            "switch",
            "many",
            "optional",
        )
        value = getattr(defaults, flag.name)
        if (
            flag.kind in ("int", "float", "text", "choice")
            and value is not None
            and flag.name != "workers"
        ):
            assert flag.default == str(value), flag.name  # shown as the field holds it
    assert flags["sitemaps"].flag == "--no-sitemaps" and flags["sitemaps"].negates
    assert flags["quiet"].short == "-q" and flags["scope"].choices == ("host", "domain", "any")
    assert flags["recrawl_after"].kind == "duration" and flags["recrawl_after"].default == "1d"
    assert Settings(recrawl_after="1d").recrawl_after == 86_400.0  # type: ignore[arg-type]
    assert Settings(max_interval="30d").max_interval == defaults.max_interval  # type: ignore[arg-type]


def test_crawl_help_shows_each_field_help_and_default() -> None:
    from click.testing import CliRunner

    from crawler.cli import main

    text = " ".join(CliRunner().invoke(main, ["--help"], terminal_width=10_000).output.split())
    for flag in Settings.flags():
        assert flag.flag in text
        assert " ".join(flag.help.split()) in text, flag.name
        if flag.default is not None:
            assert f"[default: {flag.default}]" in text, flag.name


def test_negated_and_repeatable_flags_reach_their_fields(tmp_path: Path) -> None:
    from crawler.cli.runner import settings_from

    config = tmp_path / "crawl.toml"
    config.write_text("per-host = 3\nsitemaps = true\n")
    given = {"no_sitemaps": True, "no_progress": None, "include": ("/a", "/b"), "per_host": None}
    settings = settings_from(config, given)
    assert (settings.sitemaps, settings.progress) == (False, True)
    assert (settings.include, settings.per_host) == (("/a", "/b"), 3)  # the file's, not given


def test_the_docs_flag_table_is_the_one_settings_makes() -> None:
    """docs/cli.md's flag table is generated (python -m crawler.cli.reference): a field
    added, renamed or re-described without regenerating it fails here."""
    from crawler.cli.reference import DOC, render, table

    document = DOC.read_text(encoding="utf-8")
    assert render(document) == document, "run: python -m crawler.cli.reference"
    rows = table().splitlines()[2:]  # after the header and its rule
    assert len(rows) == len(Settings.flags()) + 1  # and --config
    assert all(row.startswith("| `-") for row in rows)
