"""tilldb: an embedded, crash-safe, transactional key-value store.

Type stub of the native module (python/src/*.rs). Keys and values are bytes: ``bytes``
(used as they are), ``bytearray`` or ``memoryview`` (copied); ``str`` is refused with
``TypeError`` (encode it first). ``table=None`` is the default table.
"""

import os
from pathlib import Path
from types import TracebackType
from typing import Callable, Iterator, List, Literal, Optional, Tuple, Type, Union, final

__all__: List[str] = [
    "Db",
    "open",
    "ClosedError",
    "ConflictError",
    "CorruptionError",
    "Error",
    "InUseError",
    "InvalidArgumentError",
    "InvalidOptionsError",
    "IoError",
    "KeyRequiredError",
    "KeyUnavailableError",
    "LockedError",
    "NotADatabaseError",
    "NotEncryptedError",
    "PoisonedError",
    "ReadOnlyError",
    "TooLargeError",
    "WrongKeyError",
    "Scan",
    "Txn",
    "__version__",
]

__version__: str

_Bytes = Union[bytes, bytearray, memoryview]
_Durability = Literal["sync", "buffered", "lazy"]
_FlushMethod = Literal[
    "fsync",
    "fdatasync",
    "dsync",
    "direct",
    "direct-dsync",
    "nosync",
    "flush-file-buffers",
    "write-through",
    "no-buffering",
    "write-through-no-buffering",
]

def open(
    path: Union[str, "os.PathLike[str]"],
    *,
    cache_bytes: Optional[int] = None,
    page_bytes: Optional[int] = None,
    flush_method: Optional[_FlushMethod] = None,
    change_feed: bool = False,
    read_only: bool = False,
    key: Optional[Union[bytes, bytearray]] = None,
    key_file: Optional[Union[str, "os.PathLike[str]"]] = None,
    write_buffer_bytes: int = 0,
) -> Db:
    """Opens (creating when missing) the database in directory ``path``.

    ``read_only``: opens an existing database at its latest durable commit, while another
    process may have it open and commit; nothing on disk changes, ``begin()`` raises
    ``ReadOnlyError``, and ``refresh()`` moves to the newest durable commit. A directory
    without a database is ``NotADatabaseError``.

    ``cache_bytes``: the buffer pool (default 64 MiB, at least 8 pages). ``page_bytes``: a
    power of two from 4096 to 65536, fixed at create (default 16384). ``flush_method``: fixed
    at create; None probes the device and stores the fastest durable one. ``change_feed``: log
    each commit's writes for ``till ship``. ``write_buffer_bytes``: the write buffer (0, the
    default: off), where small commits are logged and kept in memory and reach the tree many
    at a time (docs/write-buffer.md); it makes the database's header version 5. An unknown option is a ``TypeError``; a bad flush
    method name a ``ValueError``; options the engine refuses ``InvalidOptionsError``; a
    database open in another process ``LockedError``.

    ``key``: the application's key of an encrypted database, 32 bytes; a new database is
    created encrypted (AES-256-GCM, or ChaCha20-Poly1305 on a CPU without AES instructions)
    under it, and read-only opens take it too.
    ``key_file``: a file holding the key, as ``till --key-file`` reads it: the 32 bytes, or
    64 hexadecimal digits (a trailing newline allowed). Both at once, a key of another
    length or a key file in neither format is a ``ValueError`` that names the length, never
    the key; a key of another type a ``TypeError``; a key file that cannot be read its
    ``OSError`` (``FileNotFoundError``, ...). An encrypted database opened without a key is
    ``KeyRequiredError``, with another key ``WrongKeyError``; a plain one opened with a key
    ``NotEncryptedError``; none of them changes anything on disk.
    """

@final
class Db:
    """An open database; a context manager that closes it."""

    @property
    def closed(self) -> bool: ...
    @property
    def read_only(self) -> bool:
        """True for a database opened with ``read_only=True``."""
    def refresh(self) -> None:
        """Read-only: moves to the latest durable commit of the process writing the
        database. ``InUseError`` while transactions or iterators are open; a no-op on a
        read-write database."""
    @property
    def path(self) -> Path:
        """The directory, as given to ``open``."""
    def begin(self) -> Txn:
        """Begins a read-write transaction, waiting while another thread's is open.

        ``InUseError`` if this thread's own transaction is still open (it would wait forever).
        """
    def get(self, key: _Bytes, table: Optional[str] = None) -> Optional[bytes]:
        """The latest acknowledged value of ``key``, or None."""
    def scan(
        self,
        start: Optional[_Bytes] = None,
        end: Optional[_Bytes] = None,
        table: Optional[str] = None,
        reverse: bool = False,
    ) -> Scan:
        """A lazy iterator of ``(key, value)`` from ``start`` (inclusive) to ``end``
        (exclusive), in key order or backward; it reads one snapshot, the database now."""
    def len(self, table: Optional[str] = None) -> int:
        """The number of entries in ``table`` (None: the default table; 0 for a table that
        does not exist), as readers see it now: a count kept with the table, no scan."""
    def __len__(self) -> int:
        """The number of entries in the default table."""
    def tables(self) -> List[str]:
        """The names of the named tables, in order (the default table is not listed)."""
    def compact_to(self, path: Union[str, "os.PathLike[str]"]) -> int:
        """Writes a compacted copy to ``path`` (a directory that must not exist): every table
        as one snapshot sees it, inserted afresh, so the copy holds no free pages; commits
        may go on meanwhile. Returns the entries copied. ``InvalidArgumentError`` when
        ``path`` exists or the change feed is on."""
    def close(self) -> None:
        """Checkpoints and closes. ``InUseError`` while transactions or iterators are open;
        a no-op once closed."""
    def __enter__(self) -> Db: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

@final
class Txn:
    """A read-write transaction (one at a time per database). As a context manager it commits
    ("sync") when the block ends normally and rolls back when it raises. Any call after
    commit or rollback raises ``ClosedError``."""

    def put(self, key: _Bytes, value: _Bytes, table: Optional[str] = None) -> None: ...
    def get(self, key: _Bytes, table: Optional[str] = None) -> Optional[bytes]:
        """The value of ``key``, this transaction's own writes included, or None."""
    def delete(self, key: _Bytes, table: Optional[str] = None) -> None: ...
    def drop_table(self, table: str) -> bool:
        """Drops ``table`` and every entry in it when the transaction commits; True if it
        existed as the transaction saw it. Readers that began before still see it whole. The
        default table ("") cannot be dropped, nor a table while the change feed is on:
        ``InvalidArgumentError``."""
    def scan(
        self,
        start: Optional[_Bytes] = None,
        end: Optional[_Bytes] = None,
        table: Optional[str] = None,
        reverse: bool = False,
        limit: Optional[int] = None,
    ) -> List[Tuple[bytes, bytes]]:
        """The entries from ``start`` (inclusive) to ``end`` (exclusive), backward when
        ``reverse``, this transaction's own writes included; at most ``limit`` of them, read
        lazily (a few entries of a large table cost a few)."""
    def first(self, table: Optional[str] = None) -> Optional[Tuple[bytes, bytes]]:
        """The entry with the smallest key, own writes included, or None."""
    def last(self, table: Optional[str] = None) -> Optional[Tuple[bytes, bytes]]:
        """The entry with the largest key, own writes included, or None."""
    def pop_first(self, table: Optional[str] = None) -> Optional[Tuple[bytes, bytes]]:
        """Removes the entry with the smallest key and returns it (None if empty): a queue's
        head, one descent a pop however many came before."""
    def pop_last(self, table: Optional[str] = None) -> Optional[Tuple[bytes, bytes]]:
        """Removes the entry with the largest key and returns it (None if empty)."""
    def retain(
        self,
        keep: Callable[[bytes, bytes], object],
        start: Optional[_Bytes] = None,
        end: Optional[_Bytes] = None,
        table: Optional[str] = None,
    ) -> int:
        """Removes every entry from ``start`` to ``end`` (exclusive) for which ``keep(key,
        value)`` is false; returns how many. If ``keep`` raises, the exception goes on and
        what it rejected before stays removed in the transaction (roll it back)."""
    def extract_if(
        self,
        take: Callable[[bytes, bytes], object],
        start: Optional[_Bytes] = None,
        end: Optional[_Bytes] = None,
        table: Optional[str] = None,
    ) -> List[Tuple[bytes, bytes]]:
        """Removes every entry from ``start`` to ``end`` (exclusive) for which ``take(key,
        value)`` is true and returns them, in key order."""
    def commit(self, durability: _Durability = "sync") -> None:
        """Commits; returns once the commit is as durable as asked: "sync" flushed to stable
        storage, "buffered" written to the OS (survives a kill, not a power cut), "lazy" in
        tilldb's log buffer (written and flushed within 100 ms). A bad name is a
        ``ValueError`` and leaves the transaction open; otherwise it has ended, whatever the
        result."""
    def rollback(self) -> None: ...
    def __enter__(self) -> Txn: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

@final
class Scan(Iterator[Tuple[bytes, bytes]]):
    """The lazy iterator ``Db.scan`` returns. It holds one batch of entries and one snapshot;
    exhausted, closed or garbage-collected, it releases them."""

    def __iter__(self) -> Scan: ...
    def __next__(self) -> Tuple[bytes, bytes]: ...
    def close(self) -> None:
        """Ends the iterator early (``Db.close()`` refuses while it is open)."""

class Error(Exception):
    """Base class of every error tilldb raises; the message is the engine's."""

class IoError(Error):
    """A system call failed; the message names the file and the operation."""

    errno: Optional[int]

class CorruptionError(Error):
    """Bytes on disk violate the format."""

    file: str
    offset: int

class LockedError(Error):
    """The database is open elsewhere; the message names the holder."""

    pid: Optional[int]

class PoisonedError(Error):
    """The database stopped after a failed write or flush; close it and open it again."""

class ConflictError(Error):
    """The transaction lost a write-write race; retry it."""

class TooLargeError(Error):
    """A key, value or transaction is larger than tilldb stores."""

class InvalidArgumentError(Error):
    """A call tilldb cannot act on (say, dropping the default table)."""

class InvalidOptionsError(Error):
    """The options cannot work (alone or with the existing database)."""

class KeyRequiredError(Error):
    """The database is encrypted and no key was given; nothing on disk changed."""

    key_id: str

class WrongKeyError(Error):
    """The key given does not open the database; nothing on disk changed."""

    key_id: str

class NotEncryptedError(Error):
    """A key was given for a database that is not encrypted; nothing on disk changed."""

class KeyUnavailableError(Error):
    """The key provider failed, or the system gave no random bytes."""

class NotADatabaseError(Error):
    """The directory holds another program's files, or is a file."""

class ReadOnlyError(Error):
    """A write through a database opened with ``read_only=True``."""

class ClosedError(Error):
    """The database was closed, or the transaction already ended."""

class InUseError(Error):
    """close() with transactions or iterators open, or a second begin() on the thread whose
    transaction is open."""
