"""Encrypted databases from Python (docs/encryption.md, piece 8): `tilldb.open(path, key=...)`
or `key_file=...` creates and opens one, only its key opens it, a plain one refuses a key,
and neither the data nor the key shows up where it must not: in the files on disk, or in a
message.

Run by scripts/test with the rest of python/tests (see test_tilldb.py).
"""

import os

import pytest

import tilldb

# Printable, so that a message holding the key would show it.
KEY = b"SECRET-KEY-0123456789abcdefghijk"
OTHER_KEY = b"OTHER!-KEY-0123456789abcdefghijk"
MARKER = b"MARKER-PLAINTEXT-1234"


def open_db(path, **options):
    """A database with a fixed flush method, so that creating it skips the device probe."""
    options.setdefault("flush_method", "fdatasync")
    return tilldb.open(path, **options)


def make_encrypted(path, key=KEY):
    with open_db(path, key=key) as db:
        with db.begin() as txn:
            txn.put(b"sale-1", MARKER)


def every_file(root):
    for folder, _, names in os.walk(root):
        for name in names:
            yield os.path.join(folder, name)


def test_a_database_made_with_a_key_opens_with_it_read_write_and_read_only(tmp_path):
    path = tmp_path / "db"
    make_encrypted(path)
    with tilldb.open(path, key=KEY) as db:
        assert db.get(b"sale-1") == MARKER
        with db.begin() as txn:
            txn.put(b"sale-2", b"2")
    with tilldb.open(path, key=bytearray(KEY), read_only=True) as db:
        assert db.read_only
        assert db.get(b"sale-1") == MARKER
        assert db.get(b"sale-2") == b"2"


def test_without_the_key_or_with_another_the_database_does_not_open(tmp_path):
    path = tmp_path / "db"
    make_encrypted(path)
    header = (path / "tilldb.meta").read_bytes()
    for read_only in (False, True):
        with pytest.raises(tilldb.KeyRequiredError) as required:
            tilldb.open(path, read_only=read_only)
        assert required.value.key_id.startswith("kek:")
        with pytest.raises(tilldb.WrongKeyError) as wrong:
            tilldb.open(path, key=OTHER_KEY, read_only=read_only)
        assert wrong.value.key_id == required.value.key_id, "names the key that opens it"
        assert "KEY-0123" not in str(wrong.value)
    assert (path / "tilldb.meta").read_bytes() == header, "a refused open changed the header"
    with tilldb.open(path, key=KEY) as db:
        assert db.get(b"sale-1") == MARKER


def test_a_plain_database_opened_with_a_key_is_not_encrypted(tmp_path):
    path = tmp_path / "db"
    with open_db(path) as db:
        with db.begin() as txn:
            txn.put(b"sale-1", b"1")
    for read_only in (False, True):
        with pytest.raises(tilldb.NotEncryptedError) as refused:
            tilldb.open(path, key=KEY, read_only=read_only)
        assert "KEY-0123" not in str(refused.value)
    with tilldb.open(path) as db:
        assert db.get(b"sale-1") == b"1"


def test_no_file_of_an_encrypted_database_holds_a_key_or_value_written(tmp_path):
    path = tmp_path / "db"
    with open_db(path, key=KEY) as db:
        with db.begin() as txn:
            txn.put(MARKER + b"-key", MARKER)
            txn.put(b"other", MARKER, table="orders")
    files = list(every_file(path))
    assert files, "the database has files"
    for name in files:
        with open(name, "rb") as file:
            data = file.read()
        assert MARKER not in data, f"{name} holds the marker in plaintext"
        assert KEY not in data, f"{name} holds the key"


def test_a_key_file_holds_32_bytes_or_64_hexadecimal_digits(tmp_path):
    path = tmp_path / "db"
    raw = tmp_path / "raw.key"
    raw.write_bytes(KEY)
    with open_db(path, key_file=raw) as db:
        with db.begin() as txn:
            txn.put(b"sale-1", MARKER)
    hex_file = tmp_path / "hex.key"
    hex_file.write_text(KEY.hex() + "\n")
    with tilldb.open(path, key_file=str(hex_file)) as db:
        assert db.get(b"sale-1") == MARKER
    upper = tmp_path / "upper.key"
    upper.write_text(KEY.hex().upper())
    with tilldb.open(path, key_file=upper, read_only=True) as db:
        assert db.get(b"sale-1") == MARKER
    with tilldb.open(path, key=KEY) as db:
        assert db.get(b"sale-1") == MARKER, "the key file's key is the key itself"


def test_a_bad_key_file_is_a_value_error_naming_its_length_not_its_contents(tmp_path):
    path = tmp_path / "db"
    short = tmp_path / "short.key"
    short.write_bytes(KEY[:31])
    with pytest.raises(ValueError, match="holds 31 bytes") as refused:
        tilldb.open(path, key_file=short)
    assert "KEY-0123" not in str(refused.value)
    not_hex = tmp_path / "not-hex.key"
    not_hex.write_text("zq" * 32 + "\n")
    with pytest.raises(ValueError, match="hexadecimal") as refused:
        tilldb.open(path, key_file=not_hex)
    assert "zq" not in str(refused.value)
    with pytest.raises(FileNotFoundError, match="missing.key"):
        tilldb.open(path, key_file=tmp_path / "missing.key")
    assert not path.exists(), "a refused key created the database"


def test_a_key_of_the_wrong_length_or_type_or_with_a_key_file_is_refused(tmp_path):
    path = tmp_path / "db"
    key_file = tmp_path / "raw.key"
    key_file.write_bytes(KEY)
    for key in (KEY[:31], KEY + b"!", b""):
        with pytest.raises(ValueError, match=f"key must be 32 bytes, not {len(key)}") as refused:
            tilldb.open(path, key=key)
        assert "KEY-0123" not in str(refused.value)
    with pytest.raises(TypeError, match="key must be bytes"):
        tilldb.open(path, key=KEY.decode())
    with pytest.raises(ValueError, match="not both"):
        tilldb.open(path, key=KEY, key_file=key_file)
    assert not path.exists(), "a refused key created the database"
