//! Mutants: switches that each break one safety step, to prove the tests can see what they
//! exist to exclude (shared/TESTPLAN.md, "Mutants"). They are compiled only with the
//! `mutants` cargo feature, which nothing but `scripts/mutants` turns on; without it
//! [`active`] is a constant `false` and every switch folds away.
//!
//! With the feature, `TILLDB_MUTANT=<name>` picks one. `scripts/mutants` builds the tests once
//! with the feature, runs them under each name in [`ALL`], and fails if any survives (the tests
//! pass with it). A surviving mutant is a hole in the tests, and is fixed like a bug.

/// Every mutant: its name and the safety step it breaks.
pub const ALL: [(&str, &str); 91] = [
    (
        "redo-point-inside-a-commit",
        "a page changed again while written back gets its redo point moved to the log's end, which may lie inside a commit logged in several records",
    ),
    (
        "shared-page-written-in-place",
        "a page shared with a range read is changed in place, not copied first: the range sees a later commit",
    ),
    (
        "sync-commit-unpublished",
        "a Sync commit returns before the durable lsn read-only handles open at is published",
    ),
    (
        "commit-leaves-overlay-hint",
        "a commit records older values in the overlay without clearing its empty hint",
    ),
    (
        "reads-skip-buffer",
        "reads skip the write buffer: a buffered commit is invisible until its drain",
    ),
    (
        "run-ignores-the-buffer",
        "a scan reads a leaf in place with the overlay empty without merging the buffer's versions in its span",
    ),
    (
        "run-span-stops-at-its-leaf",
        "a leaf run that ends a scan's window is checked against the buffer only to its last key, not to the window's end",
    ),
    (
        "append-check-ignores-the-buffer",
        "a commit through the tree skips the drain when its keys lie above the tree's, though the buffer holds some of them",
    ),
    (
        "run-window-forgets-changes",
        "a scan moves past a run's last entry but not past a buffered change it yielded after it: the change comes twice",
    ),
    (
        "latest-read-at-its-first-snapshot",
        "Db::get reads the buffer at the visible lsn it began with: a prune meanwhile takes the versions it sees and it returns the tree's older value",
    ),
    (
        "overlay-hint-left-set",
        "a commit records older values in the overlay without clearing its own empty hint: reads through a non-empty buffer read the tree in place past them",
    ),
    (
        "drain-drops-needed-befores",
        "a drain keeps no older values for readers though a snapshot before it precedes some buffered versions: that reader finds the drained value in the tree",
    ),
    (
        "chunk-counts-rows-twice",
        "a chunk of a drain in chunks leaves its rows in the frozen generation's sums: a length counts them there and in the catalog",
    ),
    (
        "rebuild-counts-chunks-twice",
        "the buffer's rebuild from the log keeps a chunk's rows in the sums: a read-only handle's length counts them twice",
    ),
    (
        "idle-buffer-unwatched",
        "a commit that leaves something buffered never asks the checkpoint thread to watch it: an idle writer's buffer is never drained",
    ),
    (
        "replay-forgets-the-buffer",
        "replay drops the buffered commits after the last drain: the open loses them",
    ),
    (
        "close-passes-the-buffer",
        "a handle's close writes a header whose redo point passes buffered records the tree lacks",
    ),
    (
        "reads-skip-overlay",
        "the overlay's empty hint is set while it holds entries: reads skip what old snapshots need",
    ),
    (
        "writes-ignore-readers",
        "the writer writes pages and checkpoints while read-only handles hold their snapshots",
    ),
    (
        "reader-takes-predecessor-lsn",
        "a writer that opens does not mark the published lsn as its predecessor's",
    ),
    (
        "trim-before-header",
        "a clean close removes the log before the header that names its fresh segment",
    ),
    (
        "count-not-kept-for-readers",
        "a commit changes a table's row count without keeping the old count for older snapshots",
    ),
    (
        "replay-applies-unfinished-parts",
        "recovery applies the parts of a commit whose last part the log does not hold (a prefix)",
    ),
    (
        "tree-lock-reader-ignores-writer",
        "a reader takes the tree lock without looking at the writer's flag: it reads pages a commit is changing",
    ),
    (
        "hinted-read-trusted",
        "a read takes the frame the buffer pool's hint table (or a branch's guess) names without checking it holds the page",
    ),
    (
        "held-pages-written",
        "pages of a commit logged in parts are written to the data file before its last part",
    ),
    (
        "ack-before-flush",
        "a Sync commit is acknowledged once written, before its flush",
    ),
    (
        "page-before-log",
        "a page is written back without first making the log durable to its lsn (WAL rule)",
    ),
    (
        "skip-doublewrite-flush",
        "pages are written in place before their doublewrite batch is durable",
    ),
    (
        "part-images-dropped",
        "a commit's part leaves out the full-page images it owes: the pages' changes in that part are in no record",
    ),
    (
        "no-full-page-images",
        "full-page images log changes instead of the whole page",
    ),
    (
        "image-horizon-strict",
        "full-page images compare the page lsn with < instead of <= (a bug the explorer found)",
    ),
    (
        "skip-segment-dir-flush",
        "a new log segment's directory entry is not flushed",
    ),
    (
        "retry-failed-fsync",
        "a failed log flush is retried and the log goes on",
    ),
    (
        "header-before-pages",
        "a checkpoint writes its header without writing back the pages before it",
    ),
    (
        "segment-header-before-zeros",
        "a new segment's header is written before its zeros are durable (a bug the explorer found)",
    ),
    (
        "mid-log-damage-is-end",
        "a damaged log record that the log later says was durable is taken for the log's end",
    ),
    (
        "page-id-unchecked",
        "a page's checksum and id check ignore the id it is read as: a misplaced page validates",
    ),
    (
        "no-ledger-save",
        "a checkpoint moves the redo point without saving the page ledger (lost writes unseen)",
    ),
    (
        "slot-overwrites-durable-copy",
        "a tail block's copy goes to the slot holding its durable copy, which a torn write then destroys",
    ),
    (
        "flush-covers-open-block",
        "a flush acknowledges records in the open log block, which the next write rewrites",
    ),
    (
        "ledger-unchecked",
        "a page read is not compared with the ledger: a lost write's older page is served",
    ),
    (
        "release-before-header",
        "a checkpoint frees log segments before its header is written (the old header needs them)",
    ),
    (
        "no-db-lock",
        "a database is opened without its exclusive lock: a second process opens it too",
    ),
    (
        "durable-mark-at-write",
        "the log publishes a record as durable once written: a Sync commit returns through the lock-free path before its flush",
    ),
    (
        "no-recovery-checkpoint",
        "an open that replayed log does not checkpoint: every crash keeps one more segment (issue 34)",
    ),
    (
        "unlock-before-close",
        "the database lock is released as the close begins, before its last checkpoint and header write",
    ),
    (
        "header-read-before-lock",
        "an open reads the header before it takes the database lock, and uses what it read",
    ),
    (
        "feed-skips-missing-log",
        "a feed whose position lies in a removed segment goes on at the next segment, skipping the gap",
    ),
    (
        "feed-publishes-written",
        "the feed's publisher publishes the log's written lsn, not its durable one",
    ),
    (
        "release-to-checkpoint-end",
        "a checkpoint frees log segments up to its end, not its redo point (which lags when a page stays dirty)",
    ),
    (
        "no-backpressure-wait",
        "a commit past twice the checkpoint distance is counted as waiting but does not wait",
    ),
    (
        "reopen-from-newer",
        "a reopened log begins at the newer of a feed consumer's position and the checkpoint, not the older",
    ),
    (
        "ship-ack-before-commit",
        "till ship acknowledges a batch to the till's feed before PostgreSQL commits it",
    ),
    (
        "ship-watermark-unlocked",
        "till ship reads the watermark without locking its row: two shippers of one till apply a batch twice",
    ),
    (
        "stale-redo-point",
        "a page changed again while written back keeps its old redo point (checkpoints stall, issue 21)",
    ),
    (
        "queued-sync-as-buffered",
        "a queued Sync commit is registered and enlisted as Buffered: readers see it once written, before its flush",
    ),
    (
        "wait-reads-written-mark",
        "the lock-free Wal::wait checks a Sync commit against the published written mark, not the durable one",
    ),
    (
        "redo-point-at-record-end",
        "a commit's pages are stamped with its record's end, not its start, as their redo point",
    ),
    (
        "wait-slot-not-reset",
        "a thread's reused wait slot starts its next wait already woken",
    ),
    (
        "queue-skips-poison-check",
        "a commit queue leader applies queued commits without checking the database's poison first",
    ),
    (
        "buffered-then-through",
        "under a write-through flush method, a Sync write goes through while earlier Buffered writes are not yet flushed: a power cut can keep it and lose them",
    ),
    (
        "evictions-wait-for-readers",
        "an eviction that must write a dirty page back waits for read-only handles to let go of their snapshots instead of parking the page: a reader stalls the writer's commits",
    ),
    (
        "empty-mark-lost",
        "a commit into a table it finds empty records neither an empty mark nor a value per key: older snapshots see its rows before it is acknowledged",
    ),
    (
        "spilled-older-wins",
        "a write set merged from runs spilled to disk keeps an older write of a key over a newer one: a key rewritten or deleted after it was spilled commits its first value",
    ),
    (
        "unseen-commit-unlocks-early",
        "a large commit that kept no values for older snapshots lets the tree lock go before it is visible: a snapshot registered then reads its pages as of before it",
    ),
    (
        "buffer-filter-says-no",
        "a generation's key filter answers that it holds no key: every point read and buffered commit's lookup misses the buffer",
    ),
    (
        "drain-marked-after-visible",
        "a drain or a chunk takes its rows off the buffer's sums after its commit is visible: a length read in between counts them in the catalog and in the buffer",
    ),
    (
        "snapshot-registered-after-its-advance",
        "a reader's snapshot is registered after the advance that took it: another reader's advance in between prunes what it needs (the buffer's row sums and versions, the overlay's values)",
    ),
    (
        "snapshot-registered-unlocked",
        "a snapshot is registered without the tree lock: one registered while a large commit that kept no values for older snapshots is applied reads its pages as of before it",
    ),
    (
        "feed-reopen-without-start",
        "after a feed consumer's LogMissing the log reopens with no start: nothing checks that it still begins at or before the checkpoint's redo point and reaches it",
    ),
    (
        "feed-retention-exact-counts-over",
        "a consumer whose position keeps exactly feed_retention_bytes of log files counts as over it and is dropped (one segment early)",
    ),
    (
        "feed-start-before-released",
        "the feed's moved start is made durable before its released mark: a crash between them lets a new consumer register late without a word",
    ),
    (
        "replay-redo-point-at-part",
        "recovery gives a page a commit logged in parts changed the lsn of the part that changed it as its redo point, not the commit's first part's: a redo point inside the commit",
    ),
    (
        "release-held-newest-redo-point",
        "releasing a commit logged in parts gives each page it held the commit's redo point even when the page had an older one (newest wins)",
    ),
    (
        "refresh-in-place-past-checkpoint",
        "a read-only handle's refresh goes on in place although the writer's checkpoint moved the redo point since its snapshot (and may have released the log it was following)",
    ),
    (
        "header-before-log-sync",
        "a checkpoint writes its header (the allocator state at its end) without first making the log durable to its end",
    ),
    (
        "txn-range-unlatched",
        "a write transaction's range does not take the writer lock: a commit of another transaction changes the tree between the range's leaves",
    ),
    (
        "key-wrap-unchecked",
        "unwrapping the data key ignores the tag: a wrong application key yields a data key of garbage instead of WrongKey",
    ),
    (
        "key-checked-after-open",
        "a writer checks the key only once the database is open (recovered, checkpointed, marked): a missing or wrong key is refused after files changed",
    ),
    (
        "replay-skips-pages-seen",
        "redo skips every op of a page it has read once, not only those of records the page's lsn already covers: changes the page lacked are lost",
    ),
    (
        "header-mac-unchecked",
        "an encrypted header's MAC is not checked at open: a slot changed on disk with its crc recomputed (a checkpoint lsn, a page count) is taken as written",
    ),
    (
        "record-tag-unchecked",
        "a sealed log record's tag is not checked: a record changed on disk with its crc recomputed is opened to garbage and replayed",
    ),
    (
        "scratch-in-plaintext",
        "an encrypted database's scratch files (spilled pages, a large transaction's spilled runs) are written without sealing: keys and values reach the disk in the clear",
    ),
    (
        "segment-salt-not-random",
        "a log segment's salt is a constant, not drawn at random: two copies of a database (a backup restored beside it, a rolled-back snapshot) seal different records under one key and nonce",
    ),
    (
        "page-tag-unchecked",
        "a sealed page's tag is not checked: a page changed on disk with its crc recomputed is opened to garbage and served",
    ),
    (
        "epoch-salt-kept-after-open",
        "a writer's page epoch keeps one salt (the database id) across opens: every open's counter starts again at 0 under the same key, so two opens, or two copies, seal different pages under one nonce",
    ),
    (
        "nonce-reused-on-rewrite",
        "a sealed page's nonce is its lsn, not a counter: pages stamped with one commit's lsn, or a page written again at its lsn, share a nonce under one key",
    ),
    (
        "tampered-page-repaired",
        "a sealed page whose tag fails under a matching crc is taken for torn: the doublewrite restore or redo overwrites it in silence, and the evidence of the change is gone",
    ),
    (
        "old-wrap-kept",
        "a key rotation writes the new wrap into one header slot only: the other keeps the data key wrapped by the old application key, which still unwraps it",
    ),
    (
        "rotation-ignores-running-backup",
        "a key rotation does not wait for a running backup, which then finishes after the rotation returned with the old wrap in its copy",
    ),
];

/// True when the mutant `name` is switched on (`mutants` feature and `TILLDB_MUTANT=name`).
#[cfg(feature = "mutants")]
#[must_use]
pub fn active(name: &str) -> bool {
    static CHOSEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    debug_assert!(ALL.iter().any(|(n, _)| *n == name), "unknown mutant {name}");
    CHOSEN
        .get_or_init(|| std::env::var("TILLDB_MUTANT").ok())
        .as_deref()
        == Some(name)
}

/// True when the mutant `name` is switched on: never, without the `mutants` feature.
#[cfg(not(feature = "mutants"))]
#[must_use]
#[inline]
pub const fn active(_name: &str) -> bool {
    false
}
