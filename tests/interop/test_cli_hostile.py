# SPDX-License-Identifier: Apache-2.0
"""Hostile configuration values found by a new user's trial (trial11): each is one line on
stderr naming the file and the key, exit code 2, before anything connects; a secret's text is
never quoted; control characters in what a message repeats are escaped, so an error stays one
line and cannot drive the terminal. No server is needed: every case fails while loading."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

SOURCE = {"host": "127.0.0.1", "port": 1, "database": "d", "username": "u",
          "sslmode": "disable"}


def run(firn_bin: Path, *args: str):
    env = dict(os.environ)
    env.pop("FIRN_LOG", None)
    return subprocess.run([str(firn_bin), *args], capture_output=True, text=True, timeout=60,
                          env=env)


def error_line(proc, code: int = 2) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, f"exit {proc.returncode}:\n{proc.stderr}"
    assert len(lines) == 1, f"expected one line, got {lines!r}"
    return lines[0]


def write(tmp_path: Path, name: str, doc) -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


@pytest.mark.parametrize("key", ["host", "database", "username"])
def test_empty_connection_value(firn_bin, tmp_path, key):
    # libpq would read "" as "not given" and connect somewhere else (a local socket, the OS user)
    src = write(tmp_path, "source.json", {**SOURCE, key: ""})
    line = error_line(run(firn_bin, "check", "--source", str(src)))
    assert line == f'firn: {src}: "{key}" must not be empty'


@pytest.mark.parametrize("key,name", [("publication", ""), ("publication", "p" * 64),
                                      ("update_method", {"type": "CDC", "replication_slot": "s",
                                                         "publication": ""})])
def test_publication_name_length(firn_bin, tmp_path, key, name):
    src = write(tmp_path, "source.json", {**SOURCE, key: name})
    path = "update_method.publication" if key == "update_method" else "publication"
    line = error_line(run(firn_bin, "check", "--source", str(src)))
    assert line == f'firn: {src}: "{path}": a publication name has 1 to 63 bytes'


def test_publication_of_63_bytes_loads(firn_bin, tmp_path):
    # accepted by the loader: the command fails only when it connects (port 1), exit 3
    src = write(tmp_path, "source.json", {**SOURCE, "publication": "p" * 63,
                                          "connect_timeout_seconds": 2})
    proc = run(firn_bin, "check", "--source", str(src))
    assert proc.returncode == 3, proc.stderr
    assert "publication" not in proc.stderr


@pytest.mark.parametrize("password", ["pw${2 part-of-the-secret}", "pw${a b}x",
                                      "pw${part-of-the-secret:-x}"])
def test_bad_reference_in_a_secret_is_not_quoted(firn_bin, tmp_path, password):
    src = write(tmp_path, "source.json", {**SOURCE, "password": password})
    proc = run(firn_bin, "check", "--source", str(src))
    line = error_line(proc)
    assert line == (f'firn: {src}: "password": bad variable name in "${{...}}" (not shown: the '
                    'value is a secret; write ${NAME} or ${NAME:-default}, and $$ for a literal '
                    '"$")')
    assert password[3:7] not in proc.stdout + proc.stderr


def test_bad_reference_outside_secrets_is_quoted(firn_bin, tmp_path):
    src = write(tmp_path, "source.json", {**SOURCE, "host": "h${a b}"})
    line = error_line(run(firn_bin, "check", "--source", str(src)))
    assert line == (f'firn: {src}: "host": bad variable name "a b" in "${{...}}" (write ${{NAME}} '
                    'or ${NAME:-default}; a name has letters, digits and "_")')


@pytest.mark.parametrize("level,code", [(10, 2), (9, 0), (0, 0)])
def test_gzip_level(firn_bin, tmp_path, level, code):
    dst = write(tmp_path, "destination.json", {
        "catalog": {"type": "sql", "uri": f"{tmp_path}/catalog.db",
                    "warehouse": f"{tmp_path}/warehouse"},
        "write": {"compression": "gzip", "compression_level": level}})
    proc = run(firn_bin, "check", "--destination", str(dst), "--log", "error")
    if code:
        assert error_line(proc, code) == (
            f'firn: {dst}: "write.compression_level" must be between 0 and 9 for gzip, got '
            f'{level} (0: the codec\'s default)')
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "check: ok (destination)\n"


@pytest.mark.parametrize("schema,name,what", [
    ("public", "", '"stream_name" is empty; name the source table\'s name'),
    ("", "t", "the schema key is empty; name the source table's schema")])
def test_empty_stream_names(firn_bin, tmp_path, schema, name, what):
    src = write(tmp_path, "source.json", SOURCE)
    streams = write(tmp_path, "streams.json",
                    {"selected_streams": {schema: [{"stream_name": name}]}})
    line = error_line(run(firn_bin, "check", "--source", str(src), "--streams", str(streams)))
    assert line == f'firn: {streams}: stream "{schema}.{name}": {what}'


def test_control_characters_are_escaped(firn_bin, tmp_path):
    streams = write(tmp_path, "streams.json", {"selected_streams": {"public": [
        {"stream_name": "t", "sync_mode": "full\n\x1b[31mred\t\x7f"}]}})
    src = write(tmp_path, "source.json", SOURCE)
    line = error_line(run(firn_bin, "check", "--source", str(src), "--streams", str(streams)))
    assert line.endswith('got "full\\n\\x1b[31mred\\t\\x7f"'), line
    # a usage error repeats the option as given
    line = error_line(run(firn_bin, "check", "--so\x1burce", "x"))
    assert line == 'firn: check: unknown option "--so\\x1burce"; run "firn check --help"'


def test_long_message(firn_bin):
    # longer than the 1 KiB the escaping formats into first: the heap path, escapes included
    option = "--\x01" + "x" * 1500
    line = error_line(run(firn_bin, "check", option))
    assert line.startswith('firn: check: unknown option "--\\x01' + "x" * 100), line[:200]


@pytest.mark.parametrize("text,what", [
    ("", "the file is empty; it must hold a JSON object"),
    (" \n\t\n", "the file is empty; it must hold a JSON object"),
    ('{"host": "h", "password": "se\\u0000cret"}',
     '1:40: invalid JSON: \\u0000 (a NUL character) is not allowed at key "password"')])
def test_empty_file_and_nul(firn_bin, tmp_path, text, what):
    """trial13: an empty file said "2:0: invalid JSON: '[' or '{' expected", and a \\u0000 named
    jansson's flag ("... is not allowed without JSON_ALLOW_NUL")."""
    src = write(tmp_path, "source.json", text)
    line = error_line(run(firn_bin, "check", "--source", str(src)))
    assert line == f"firn: {src}: {what}" if what.startswith("the") else \
        line == f"firn: {src}:{what}", line
    assert "cret" not in line


def test_utf8_byte_order_mark_is_accepted(firn_bin, tmp_path):
    """trial13: a file saved with a UTF-8 byte-order mark (Windows Notepad) said "1:1: invalid
    JSON: '[' or '{' expected"; the mark is skipped, and the file's own mistakes still show."""
    src = tmp_path / "source.json"
    src.write_bytes(b"\xef\xbb\xbf" + json.dumps({**SOURCE, "hots": "x"}).encode())
    line = error_line(run(firn_bin, "check", "--source", str(src)))
    assert line == f'firn: {src}: unknown key "hots" (did you mean "host"?)', line
