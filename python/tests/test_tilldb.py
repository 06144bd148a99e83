"""The Python package `tilldb` end to end: what each call does to the database, checked
through the package itself, other processes and the files on disk.

Run by scripts/test in a venv: `pip install ./python pytest`, then `python -m pytest -q
python/tests`.
"""

import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import tilldb

REPO = Path(__file__).resolve().parents[2]


def open_db(path, **options):
    """A database with a fixed flush method, so that creating it skips the device probe."""
    options.setdefault("flush_method", "fdatasync")
    return tilldb.open(path, **options)


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "db"


@pytest.fixture
def db(db_path):
    db = open_db(db_path)
    yield db
    if not db.closed:
        gc.collect()  # iterators or transactions a failed test left behind
        db.close()


def put_rows(db, rows, table=None):
    with db.begin() as txn:
        for key, value in rows:
            txn.put(key, value, table=table)


def keys(n, prefix=b"k"):
    return [b"%s%05d" % (prefix, i) for i in range(n)]


# Round trips


def test_put_get_delete_in_the_default_table_and_a_named_table(db):
    txn = db.begin()
    txn.put(b"apple", b"1")
    txn.put(b"apple", b"in orders", table="orders")
    txn.put(b"pear", b"2")
    # The transaction sees its own writes; the database does not, yet.
    assert txn.get(b"apple") == b"1"
    assert txn.get(b"apple", table="orders") == b"in orders"
    assert db.get(b"apple") is None
    txn.commit()

    assert db.get(b"apple") == b"1"
    assert db.get(b"apple", table="orders") == b"in orders"
    assert db.get(b"pear", table="orders") is None
    assert db.get(b"missing") is None
    assert db.get(b"apple", table="no such table") is None

    with db.begin() as txn:
        txn.delete(b"apple")
        txn.delete(b"never there")
        assert txn.get(b"apple") is None
        assert txn.get(b"apple", table="orders") == b"in orders"
    assert db.get(b"apple") is None
    assert db.get(b"pear") == b"2"
    assert db.get(b"apple", table="orders") == b"in orders"
    with db.begin() as txn:
        txn.delete(b"apple", table="orders")
    assert db.get(b"apple", table="orders") is None


def test_bytearray_and_memoryview_keys_and_values_are_accepted(db):
    key = bytearray(b"mutable")
    with db.begin() as txn:
        txn.put(key, memoryview(b"view of bytes"))
        txn.put(memoryview(b"mv"), bytearray(b"ba"))
        key[0:1] = b"M"  # changing the caller's buffer later changes nothing stored
    assert db.get(b"mutable") == b"view of bytes"
    assert db.get(bytearray(b"mv")) == b"ba"
    assert db.get(b"Mutable") is None
    assert db.get(b"") is None  # the empty key is a key like any other
    with db.begin() as txn:
        txn.put(b"", b"empty key")
    assert db.get(b"") == b"empty key"


def test_str_keys_and_values_are_refused_with_type_error(db):
    txn = db.begin()
    with pytest.raises(TypeError, match=r"key must be bytes.*not str.*encode"):
        txn.put("text", b"v")
    with pytest.raises(TypeError, match="value must be bytes"):
        txn.put(b"k", "text")
    with pytest.raises(TypeError, match="key must be bytes"):
        txn.get("text")
    with pytest.raises(TypeError, match="key must be bytes"):
        txn.delete("text")
    with pytest.raises(TypeError):
        txn.put(b"k", b"v", table=b"bytes table name")
    with pytest.raises(TypeError, match="not int"):
        txn.put(1, b"v")
    # The transaction is still usable after a refused argument.
    txn.put(b"k", b"v")
    txn.commit()
    with pytest.raises(TypeError, match="key must be bytes"):
        db.get("k")
    with pytest.raises(TypeError, match="start must be bytes"):
        db.scan(start="k")
    with pytest.raises(TypeError, match="end must be bytes"):
        db.scan(end="k")
    assert db.get(b"k") == b"v"


def test_a_key_longer_than_the_page_allows_is_too_large(db):
    txn = db.begin()
    with pytest.raises(tilldb.TooLargeError, match="key of 5000 bytes"):
        txn.put(b"k" * 5000, b"v")
    txn.rollback()


# Transactions


def test_the_context_manager_commits_when_the_block_ends(db):
    with db.begin() as txn:
        txn.put(b"k", b"v")
    assert db.get(b"k") == b"v"
    with pytest.raises(tilldb.ClosedError):
        txn.put(b"k2", b"v2")


def test_the_context_manager_rolls_back_when_the_block_raises(db):
    put_rows(db, [(b"kept", b"1")])
    with pytest.raises(RuntimeError, match="declined"):
        with db.begin() as txn:
            txn.put(b"lost", b"2")
            txn.put(b"kept", b"changed")
            txn.delete(b"kept", table="other")
            raise RuntimeError("the card was declined")
    assert db.get(b"lost") is None
    assert db.get(b"kept") == b"1"
    with pytest.raises(tilldb.ClosedError):
        txn.get(b"kept")
    # The writer lock was released: the next transaction begins at once.
    put_rows(db, [(b"after", b"3")])
    assert db.get(b"after") == b"3"


def test_a_block_that_ended_its_transaction_itself_is_left_as_it_is(db):
    with db.begin() as txn:
        txn.put(b"rolled back", b"1")
        txn.rollback()
    with db.begin() as txn:
        txn.put(b"committed lazily", b"2")
        txn.commit("lazy")
    assert db.get(b"rolled back") is None
    assert db.get(b"committed lazily") == b"2"


def test_rollback_drops_every_write(db):
    put_rows(db, [(b"a", b"1")])
    txn = db.begin()
    txn.put(b"a", b"changed")
    txn.put(b"b", b"new", table="t")
    txn.rollback()
    assert db.get(b"a") == b"1"
    assert db.get(b"b", table="t") is None


@pytest.mark.parametrize("durability", ["sync", "buffered", "lazy"])
def test_each_durability_level_commits_and_survives_close(db_path, durability):
    db = open_db(db_path)
    txn = db.begin()
    txn.put(b"level", durability.encode())
    txn.commit(durability)
    assert db.get(b"level") == durability.encode()
    db.close()
    db = open_db(db_path)
    assert db.get(b"level") == durability.encode()
    db.close()


def test_commit_without_a_level_is_sync(db):
    txn = db.begin()
    txn.put(b"k", b"v")
    txn.commit()
    assert db.get(b"k") == b"v"


def test_an_unknown_durability_is_a_value_error_and_leaves_the_transaction_open(db):
    txn = db.begin()
    txn.put(b"k", b"v")
    for bad in ["fast", "SYNC", ""]:
        with pytest.raises(ValueError, match="expected sync, buffered or lazy"):
            txn.commit(bad)
    assert txn.get(b"k") == b"v"
    txn.commit("buffered")
    assert db.get(b"k") == b"v"


def test_every_call_on_an_ended_transaction_raises_closed_error(db):
    for end in ["commit", "rollback"]:
        txn = db.begin()
        getattr(txn, end)()
        for call in [
            lambda: txn.put(b"k", b"v"),
            lambda: txn.get(b"k"),
            lambda: txn.delete(b"k"),
            lambda: txn.commit(),
            lambda: txn.commit("lazy"),
            lambda: txn.rollback(),
        ]:
            with pytest.raises(tilldb.ClosedError, match="transaction has ended"):
                call()
    assert issubclass(tilldb.ClosedError, tilldb.Error)


def test_a_second_begin_on_the_same_thread_raises_instead_of_waiting_forever(db):
    txn = db.begin()
    with pytest.raises(tilldb.InUseError, match="would wait for it forever"):
        db.begin()
    txn.commit()
    db.begin().rollback()


def test_a_read_on_another_thread_waits_for_the_transaction_that_read_first(db):
    first = db.begin()
    assert first.get(b"k") is None  # its first read takes the writer lock
    first.put(b"k", b"first")
    seen = []

    def second():
        with db.begin() as txn:  # begins at once: nothing read yet
            seen.append(txn.get(b"k"))
            txn.put(b"k", b"second")

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.3)
    # Its read waits for the writer lock, without holding the GIL (this thread runs).
    assert thread.is_alive()
    assert seen == []
    first.commit()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert seen == [b"first"]
    assert db.get(b"k") == b"second"


def test_transactions_that_only_write_do_not_wait_for_one_that_read(db):
    reader = db.begin()
    assert reader.get(b"a") is None  # holds the writer lock from here
    done = []

    def writer():
        with db.begin() as txn:
            txn.put(b"b", b"blind")
        done.append(True)

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.3)
    # The blind writer's commit waits for the lock, so it has not committed...
    assert done == []
    assert db.get(b"b") is None
    reader.put(b"a", b"read-then-wrote")
    reader.commit()
    thread.join(timeout=30)
    # ...and commits right after the reader.
    assert done == [True]
    assert db.get(b"a") == b"read-then-wrote"
    assert db.get(b"b") == b"blind"


def test_a_transaction_garbage_collected_while_open_rolls_back(db):
    txn = db.begin()
    txn.put(b"k", b"v")
    del txn
    gc.collect()
    # The writer lock is free and nothing was written.
    with db.begin() as txn:
        assert txn.get(b"k") is None
    assert db.get(b"k") is None
    db.close()


# Scans


def test_len_counts_the_entries_of_a_table_without_a_scan(db):
    assert len(db) == 0
    assert db.len(table="nowhere") == 0
    put_rows(db, [(k, b"v") for k in keys(10)])
    put_rows(db, [(b"a", b"1"), (b"b", b"2")], table="t")
    assert len(db) == 10
    assert db.len() == 10
    assert db.len(table="t") == 2
    with db.begin() as txn:
        txn.put(keys(10)[0], b"overwritten")
        txn.delete(keys(10)[1])
        txn.delete(b"never there")
    assert len(db) == 9


def test_scan_forward_backward_bounded_and_by_table(db):
    put_rows(db, [(k, k.upper()) for k in keys(10)])
    put_rows(db, [(b"k00003", b"in t"), (b"z", b"last in t")], table="t")

    forward = list(db.scan())
    assert [k for k, _ in forward] == keys(10)
    assert all(v == k.upper() for k, v in forward)
    assert [k for k, _ in db.scan(reverse=True)] == keys(10)[::-1]
    # start is inclusive, end exclusive, in both directions.
    assert [k for k, _ in db.scan(start=b"k00002", end=b"k00005")] == keys(10)[2:5]
    assert [k for k, _ in db.scan(start=b"k00002", end=b"k00005", reverse=True)] == keys(10)[
        4:1:-1
    ]
    assert [k for k, _ in db.scan(start=b"k00007")] == keys(10)[7:]
    assert [k for k, _ in db.scan(end=b"k00002")] == keys(10)[:2]
    assert [k for k, _ in db.scan(start=b"k000025", end=b"k00004")] == [b"k00003"]
    assert list(db.scan(start=b"k00005", end=b"k00005")) == []
    assert list(db.scan(start=b"x")) == []

    assert list(db.scan(table="t")) == [(b"k00003", b"in t"), (b"z", b"last in t")]
    assert list(db.scan(table="t", reverse=True)) == [(b"z", b"last in t"), (b"k00003", b"in t")]
    assert list(db.scan(table="no such table")) == []
    # The default table holds none of t's entries.
    assert b"z" not in [k for k, _ in db.scan()]


def test_a_scan_of_many_batches_is_lazy_and_reads_one_snapshot(db):
    # The engine reads 256 entries a batch: 1,000 rows are four batches.
    rows = [(k, b"value-" + k) for k in keys(1000)]
    put_rows(db, rows)
    scan = db.scan()
    assert not isinstance(scan, (list, tuple))
    head = [next(scan) for _ in range(300)]  # past the first batch
    assert head == rows[:300]
    # Commits between batches: the scan goes on in its own snapshot.
    with db.begin() as txn:
        for key, _ in rows[500:]:
            txn.delete(key)
        txn.put(b"k00400", b"changed")
        txn.put(b"k00400x", b"inserted")
    rest = list(scan)
    assert head + rest == rows
    assert len(head) + len(rest) == 1000
    # A new scan sees the commit.
    now = list(db.scan())
    assert len(now) == 501
    assert (b"k00400", b"changed") in now
    assert (b"k00400x", b"inserted") in now
    backward = list(db.scan(reverse=True))
    assert backward == now[::-1]


def test_a_scan_does_not_see_commits_made_after_it_started(db):
    put_rows(db, [(b"a", b"1"), (b"b", b"2")])
    scan = db.scan()  # the snapshot is taken here, before the first next()
    put_rows(db, [(b"c", b"3"), (b"a", b"changed")])
    with db.begin() as txn:
        txn.delete(b"b")
    assert list(scan) == [(b"a", b"1"), (b"b", b"2")]
    assert list(db.scan()) == [(b"a", b"changed"), (b"c", b"3")]


def test_an_exhausted_scan_keeps_raising_stop_iteration(db):
    put_rows(db, [(b"a", b"1")])
    scan = db.scan()
    assert next(scan) == (b"a", b"1")
    for _ in range(3):
        with pytest.raises(StopIteration):
            next(scan)


# Close and reopen


def test_reopen_after_close_keeps_every_table(db_path):
    db = open_db(db_path)
    put_rows(db, [(k, k) for k in keys(300)])
    put_rows(db, [(b"o-1", b"order")], table="orders")
    db.close()
    assert db.closed
    db.close()  # a second close does nothing
    with pytest.raises(tilldb.ClosedError, match="closed"):
        db.get(b"k00001")
    with pytest.raises(tilldb.ClosedError):
        db.begin()
    with pytest.raises(tilldb.ClosedError):
        db.scan()

    db = open_db(db_path)
    assert [k for k, _ in db.scan()] == keys(300)
    assert db.get(b"o-1", table="orders") == b"order"
    db.close()


def test_a_transaction_larger_than_a_log_segment_commits_whole(db_path):
    """Issue 36: no limit of its own from Python. 400,000 rows of 150-byte values log about
    76 MB, beyond a 64 MiB segment's one record: several parts of 8 MiB; a 2 MiB cache
    spills the pages held for the last part."""
    db = open_db(db_path, cache_bytes=2 << 20)
    rows = [(b"%016x-%07d" % (i * 2654435761 % (1 << 64), i), bytes([i % 256]) * 150)
            for i in range(400_000)]
    put_rows(db, rows)
    db.close()
    db = open_db(db_path)
    got = list(db.scan())
    assert len(got) == len(rows)
    assert dict(got) == dict(rows)
    db.close()


def test_the_db_context_manager_closes_and_releases_the_lock(db_path):
    with open_db(db_path) as db:
        put_rows(db, [(b"k", b"v")])
        assert not db.closed
    assert db.closed
    with open_db(db_path) as again:  # the lock went with the close
        assert again.get(b"k") == b"v"


def test_close_is_refused_while_a_transaction_is_open(db):
    txn = db.begin()
    txn.put(b"k", b"v")
    with pytest.raises(tilldb.InUseError, match=r"1 transaction\(s\) and 0 iterator\(s\)"):
        db.close()
    assert not db.closed
    txn.commit()
    db.close()
    assert db.closed


def test_close_is_refused_while_an_iterator_is_open(db):
    put_rows(db, [(b"a", b"1"), (b"b", b"2")])
    scan = db.scan()
    assert next(scan) == (b"a", b"1")
    with pytest.raises(tilldb.InUseError, match=r"0 transaction\(s\) and 1 iterator\(s\)"):
        db.close()
    scan.close()
    with pytest.raises(StopIteration):
        next(scan)
    # An exhausted iterator, and one deleted, count no more.
    exhausted = db.scan()
    assert len(list(exhausted)) == 2
    deleted = db.scan()
    next(deleted)
    del deleted
    gc.collect()
    db.close()
    assert db.closed


# Options


def test_unknown_options_and_bad_values_are_refused(db_path):
    with pytest.raises(TypeError, match="durabilty"):
        tilldb.open(db_path, durabilty="sync")
    with pytest.raises(ValueError, match=r"flush_method: unknown flush method \"fdatasnyc\""):
        tilldb.open(db_path, flush_method="fdatasnyc")
    with pytest.raises(tilldb.InvalidOptionsError, match="page size 1000"):
        tilldb.open(db_path, page_bytes=1000)
    with pytest.raises(tilldb.InvalidOptionsError, match="fewer than 8 pages"):
        tilldb.open(db_path, cache_bytes=4096)
    assert issubclass(tilldb.InvalidOptionsError, tilldb.Error)


def test_page_bytes_is_fixed_at_create_and_limits_keys(tmp_path):
    # At 4 KiB pages a key may have 995 bytes; at the default 16 KiB, 2048.
    with open_db(tmp_path / "small", page_bytes=4096, cache_bytes=1 << 20) as db:
        txn = db.begin()
        with pytest.raises(tilldb.TooLargeError, match="maximum of 995"):
            txn.put(b"k" * 1500, b"v")
        txn.rollback()
    with open_db(tmp_path / "default") as db:
        put_rows(db, [(b"k" * 1500, b"v")])
        assert db.get(b"k" * 1500) == b"v"
    with pytest.raises(tilldb.InvalidOptionsError, match="tilldb.meta"):
        open_db(tmp_path / "small", page_bytes=8192)


def test_change_feed_logs_writes_for_the_feed(tmp_path):
    with open_db(tmp_path / "feed", change_feed=True, flush_method="nosync") as db:
        put_rows(db, [(b"k", b"v")])
    assert (tmp_path / "feed" / "feed").is_dir()
    with open_db(tmp_path / "plain") as db:
        put_rows(db, [(b"k", b"v")])
    assert not (tmp_path / "plain" / "feed").exists()


def test_a_write_buffer_keeps_small_commits_readable_and_across_a_reopen(tmp_path):
    path = tmp_path / "buffered"
    with open_db(path, write_buffer_bytes=1 << 20) as db:
        for i in range(50):
            with db.begin() as txn:
                txn.put(b"k%03d" % i, b"v%d" % i)
                if i % 5 == 4:
                    txn.delete(b"k%03d" % (i - 2))
        assert db.get(b"k010") == b"v10"
        assert db.get(b"k012") is None
        assert db.len() == 40
    # The option took: the header is version 5, the write buffer's (the u32 at offset 8 of
    # each 4 KiB slot; the newer slot holds it).
    meta = (path / "tilldb.meta").read_bytes()
    assert 5 in (meta[8], meta[4096 + 8])
    with open_db(path) as db:
        assert db.get(b"k049") == b"v49"
        assert db.len() == 40


# Errors


def test_drop_table_removes_a_table_atomically_and_the_default_table_is_refused(db):
    put_rows(db, [(k, b"v") for k in keys(300)], table="drafts")
    put_rows(db, [(b"kept", b"1")])
    with db.begin() as txn:
        assert txn.drop_table("drafts") is True
        assert txn.get(b"k00001", table="drafts") is None
        assert txn.drop_table("drafts") is False
    assert list(db.scan(table="drafts")) == []
    assert db.get(b"k00001", table="drafts") is None
    assert db.get(b"kept") == b"1"
    with db.begin() as txn:
        with pytest.raises(tilldb.InvalidArgumentError, match="default table"):
            txn.drop_table("")
        txn.rollback()
    # A drop rolled back by an exception leaves the table.
    put_rows(db, [(b"a", b"1")], table="other")
    with pytest.raises(RuntimeError):
        with db.begin() as txn:
            txn.drop_table("other")
            raise RuntimeError("abandon")
    assert list(db.scan(table="other")) == [(b"a", b"1")]


def test_tables_and_a_compacted_copy_with_every_row_in_a_smaller_file(db, tmp_path):
    put_rows(db, [(k, b"v" * 200) for k in keys(2000)], table="sales")
    put_rows(db, [(b"a", b"1")], table="other")
    with db.begin() as txn:
        for k in keys(2000)[100:]:
            txn.delete(k, table="sales")
    assert db.tables() == ["other", "sales"]
    target = tmp_path / "compacted"
    assert db.compact_to(target) == 101
    with pytest.raises(tilldb.InvalidArgumentError, match="exists"):
        db.compact_to(target)
    rows = list(db.scan(table="sales"))
    db.close()  # a checkpoint: the source's pages are in its file
    source_bytes = (Path(db.path) / "data.tdb").stat().st_size
    copy = open_db(target)
    try:
        assert copy.tables() == ["other", "sales"]
        assert list(copy.scan(table="sales")) == rows
    finally:
        copy.close()
    assert (target / "data.tdb").stat().st_size * 2 < source_bytes


def test_every_error_class_is_a_tilldb_error():
    for name in [
        "IoError",
        "CorruptionError",
        "LockedError",
        "PoisonedError",
        "ConflictError",
        "TooLargeError",
        "InvalidOptionsError",
        "InvalidArgumentError",
        "NotADatabaseError",
        "ReadOnlyError",
        "KeyRequiredError",
        "WrongKeyError",
        "NotEncryptedError",
        "KeyUnavailableError",
        "ClosedError",
        "InUseError",
    ]:
        cls = getattr(tilldb, name)
        assert issubclass(cls, tilldb.Error), name
        assert cls.__module__ == "tilldb"
    assert issubclass(tilldb.Error, Exception)


def test_a_second_open_in_another_process_raises_locked_error_naming_the_holder(db, db_path):
    child = (
        "import sys, tilldb\n"
        "try:\n"
        "    tilldb.open(sys.argv[1])\n"
        "except tilldb.LockedError as e:\n"
        "    print(e.pid)\n"
        "    print(e)\n"
        "else:\n"
        "    print('opened')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", child, str(db_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    pid, message = out.stdout.splitlines()
    assert int(pid) == os.getpid()
    assert f"already open in process {os.getpid()}" in message
    assert str(db_path) in message
    # In this process too, while the first handle is open.
    with pytest.raises(tilldb.LockedError, match="in this process") as caught:
        tilldb.open(db_path)
    assert caught.value.pid == os.getpid()


def test_a_damaged_data_file_is_a_corruption_error_with_file_and_offset(db_path):
    with open_db(db_path) as db:
        put_rows(db, [(k, b"v" * 100) for k in keys(2000)])
    data = db_path / "data.tdb"
    size = data.stat().st_size
    assert size > 8 * 16384, "several pages, so the middle is not the header"
    with open(data, "r+b") as f:
        # Three pages in the middle of the file, so that one of them is in the tree whatever
        # the allocator's layout.
        for offset in [size // 2 - 16384, size // 2, size // 2 + 16384]:
            f.seek(offset)
            f.write(b"\xff" * 64)
    # Opening reads only what it needs; the damaged page is reported when it is read.
    with pytest.raises(tilldb.CorruptionError) as caught:
        db = open_db(db_path)
        try:
            for _ in db.scan():
                pass
        finally:
            gc.collect()
            db.close()
    error = caught.value
    assert isinstance(error, tilldb.Error)
    assert error.file == str(data)
    assert 0 < error.offset < size
    assert f"corrupt {data} at offset {error.offset}" in str(error)


def test_a_directory_of_another_program_is_not_a_database(tmp_path):
    (tmp_path / "notes.txt").write_text("not tilldb's")
    with pytest.raises(tilldb.NotADatabaseError, match="is not a tilldb database"):
        tilldb.open(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# The example


def test_the_sales_example_runs(tmp_path):
    example = REPO / "examples" / "python" / "sales.py"
    for run in range(2):  # and again on the same database: the same sales, overwritten
        out = subprocess.run(
            [sys.executable, str(example), str(tmp_path / "sales-db")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].split() == ["sale-0001", "coffee", "2.50"]
        assert lines[2].split() == ["sale-0003", "croissant", "3.20"]
        assert lines[-1] == "ok: 5 sales, total 14.00", run
    with open_db(tmp_path / "sales-db") as db:
        assert len(list(db.scan(table="sales"))) == 5
        assert db.get(b"sale-0006", table="sales") is None


# Read-only handles


def test_a_read_only_database_in_another_process_reads_live_commits_and_refreshes(db, db_path):
    put_rows(db, [(k, b"v") for k in keys(100)])
    child = (
        "import sys, time, tilldb\n"
        "db = tilldb.open(sys.argv[1], read_only=True)\n"
        "assert db.read_only\n"
        "first = len(db)\n"
        "try:\n"
        "    db.begin()\n"
        "except tilldb.ReadOnlyError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('begin() on a read-only database')\n"
        "print(first, flush=True)\n"
        "sys.stdin.readline()\n"
        "deadline = time.time() + 10\n"
        "while len(db) == first and time.time() < deadline:\n"
        "    time.sleep(0.01)\n"
        "    db.refresh()\n"
        "print(len(db), db.get(b'k00150'))\n"
        "db.close()\n"
    )
    reader = subprocess.Popen(
        [sys.executable, "-c", child, str(db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The writer's published durable lsn may lag its commit by a few milliseconds.
    first = int(reader.stdout.readline())
    assert first in (0, 100), first
    put_rows(db, [(k, b"w") for k in keys(200)])
    reader.stdin.write("go\n")
    reader.stdin.flush()
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert out.split() == ["200", "b'w'"], out


def test_refresh_is_refused_while_an_iterator_is_open_and_read_only_needs_a_database(tmp_path):
    path = tmp_path / "db"
    with open_db(path) as db:
        put_rows(db, [(k, b"v") for k in keys(10)])
    with tilldb.open(path, read_only=True) as reader:
        scan = reader.scan()
        next(scan)
        with pytest.raises(tilldb.InUseError):
            reader.refresh()
        del scan
        gc.collect()
        reader.refresh()
        assert len(reader) == 10
    with pytest.raises(tilldb.NotADatabaseError):
        tilldb.open(tmp_path / "missing", read_only=True)
    assert not (tmp_path / "missing").exists()


def test_a_write_transaction_pops_scans_retains_and_extracts_with_its_own_writes(db):
    with db.begin() as txn:
        for i in range(100):
            txn.put(b"q%03d" % i, b"v%d" % i)
    with db.begin() as txn:
        # Its own writes count: a put before the head, a delete of the second key.
        txn.put(b"a", b"first")
        txn.delete(b"q001")
        assert txn.first() == (b"a", b"first")
        assert txn.last() == (b"q099", b"v99")
        assert txn.pop_first() == (b"a", b"first")
        assert txn.pop_first() == (b"q000", b"v0")
        assert txn.pop_first() == (b"q002", b"v2")
        assert txn.pop_last() == (b"q099", b"v99")
        assert txn.scan(limit=2) == [(b"q003", b"v3"), (b"q004", b"v4")]
        assert txn.scan(start=b"q095", reverse=True) == [
            (b"q098", b"v98"),
            (b"q097", b"v97"),
            (b"q096", b"v96"),
            (b"q095", b"v95"),
        ]
        removed = txn.retain(lambda k, v: int(k[1:]) % 2 == 0, start=b"q010", end=b"q020")
        assert removed == 5
        taken = txn.extract_if(lambda k, v: k.endswith(b"5"), start=b"q030", end=b"q060")
        assert taken == [(b"q035", b"v35"), (b"q045", b"v45"), (b"q055", b"v55")]
        with pytest.raises(ZeroDivisionError):
            txn.retain(lambda k, v: 1 / 0)
        txn.rollback()
    with db.begin() as txn:
        assert txn.first() == (b"q000", b"v0")
        assert txn.pop_first(table="absent") is None
        assert len(txn.scan()) == 100
