//! The PostgreSQL side of `till ship`: the tables (mapping in `mod.rs`), the watermark, and
//! applying a batch of transactions above it.

use super::exit::{Exit, Failure};
use postgres::{Client, Transaction};
use tilldb::Lsn;
use tilldb::feed::FeedTxn;

/// The PostgreSQL table of tilldb table `table`.
pub fn pg_table(table: &str) -> Result<String, String> {
    let name = if table.is_empty() {
        "tilldb_default".to_string()
    } else {
        format!("tilldb_{table}")
    };
    // PostgreSQL truncates identifiers past 63 bytes: two tables could become one.
    if name.len() > 63 || name.contains('\0') {
        return Err(format!(
            "tilldb table {table:?} cannot be a PostgreSQL table name (at most 56 bytes, no NUL)"
        ));
    }
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

fn pg_table_or_fail(table: &str) -> Result<String, Failure> {
    pg_table(table).map_err(|e| Failure::new(Exit::PostgresRefused, e))
}

/// The till's watermark (the lsn after the last transaction PostgreSQL holds), read without
/// creating anything: a refusal must leave PostgreSQL as it was.
pub fn watermark(client: &mut Client, till_id: &str) -> Result<Option<Lsn>, Failure> {
    let exists: bool = client
        .query_one("SELECT to_regclass('tilldb_watermark') IS NOT NULL", &[])?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let row = client.query_opt(
        "SELECT lsn FROM tilldb_watermark WHERE till_id = $1",
        &[&till_id],
    )?;
    Ok(row.map(|r| Lsn(lsn_of(r.get::<_, i64>(0)))))
}

pub fn create_watermark_table(client: &mut Client) -> Result<(), Failure> {
    client.batch_execute(
        "CREATE TABLE IF NOT EXISTS tilldb_watermark (
             till_id text PRIMARY KEY,
             lsn bigint NOT NULL,
             shipped_at timestamptz NOT NULL DEFAULT now())",
    )?;
    Ok(())
}

pub fn lsn_of(value: i64) -> u64 {
    u64::try_from(value).expect("lsns below 2^62 are stored as non-negative bigints")
}

pub fn pg_lsn(lsn: Lsn) -> i64 {
    i64::try_from(lsn.0).expect("lsns stay below 2^62")
}

pub fn create_table(client: &mut Client, table: &str) -> Result<(), Failure> {
    let name = pg_table_or_fail(table)?;
    client.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {name} (
             till_id text NOT NULL,
             key bytea NOT NULL,
             value bytea NOT NULL,
             lsn bigint NOT NULL,
             PRIMARY KEY (till_id, key))"
    ))?;
    Ok(())
}

/// Locks the till's watermark row (`SELECT ... FOR UPDATE`) and returns it (0: none). Every
/// writer of the till's rows takes this lock first, so two shippers of one till never apply
/// the same transaction twice. A till without a row gets one at 0 first, in this
/// transaction: a missing row cannot be locked, and two first shipments (or a shipment and
/// a `--resync`) would both go ahead; the second insert waits for the first's commit.
pub fn lock_watermark(pg: &mut Transaction<'_>, till_id: &str) -> Result<Lsn, Failure> {
    pg.execute(
        "INSERT INTO tilldb_watermark (till_id, lsn) VALUES ($1, 0) ON CONFLICT (till_id) DO NOTHING",
        &[&till_id],
    )?;
    let query = if tilldb::mutants::active("ship-watermark-unlocked") {
        "SELECT lsn FROM tilldb_watermark WHERE till_id = $1"
    } else {
        "SELECT lsn FROM tilldb_watermark WHERE till_id = $1 FOR UPDATE"
    };
    let locked = pg.query_opt(query, &[&till_id])?;
    Ok(Lsn(locked.map_or(0, |r| lsn_of(r.get::<_, i64>(0)))))
}

/// Moves the till's watermark to `lsn`. Requires: the caller locked it (`lock_watermark`) in
/// this transaction.
pub fn set_watermark(pg: &mut Transaction<'_>, till_id: &str, lsn: Lsn) -> Result<(), Failure> {
    pg.execute(
        "INSERT INTO tilldb_watermark (till_id, lsn) VALUES ($1, $2)
         ON CONFLICT (till_id) DO UPDATE SET lsn = EXCLUDED.lsn, shipped_at = now()",
        &[&till_id, &pg_lsn(lsn)],
    )?;
    Ok(())
}

/// Upserts `(till_id, key)` of `table` with `value` written at `lsn`, or deletes it (`None`).
pub fn write_row(
    pg: &mut Transaction<'_>,
    till_id: &str,
    table: &str,
    key: &[u8],
    value: Option<&[u8]>,
    lsn: Lsn,
) -> Result<(), Failure> {
    let name = pg_table_or_fail(table)?;
    match value {
        Some(value) => pg.execute(
            &format!(
                "INSERT INTO {name} (till_id, key, value, lsn) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (till_id, key)
                 DO UPDATE SET value = EXCLUDED.value, lsn = EXCLUDED.lsn"
            ),
            &[&till_id, &key, &value, &pg_lsn(lsn)],
        )?,
        None => pg.execute(
            &format!("DELETE FROM {name} WHERE till_id = $1 AND key = $2"),
            &[&till_id, &key],
        )?,
    };
    Ok(())
}

/// Applies the transactions of `batch` above the till's watermark and moves the watermark
/// to the last; returns how many were applied. The caller commits.
pub fn apply(pg: &mut Transaction<'_>, till_id: &str, batch: &[FeedTxn]) -> Result<u64, Failure> {
    let watermark = lock_watermark(pg, till_id)?;
    let mut applied = 0;
    for txn in batch.iter().filter(|t| t.lsn > watermark) {
        for change in &txn.changes {
            write_row(
                pg,
                till_id,
                &change.table,
                &change.key,
                change.value.as_deref(),
                txn.lsn,
            )?;
        }
        applied += 1;
    }
    let last = batch.last().expect("a batch is not empty").lsn;
    if last > watermark {
        set_watermark(pg, till_id, last)?;
    }
    Ok(applied)
}

/// Rows per statement when a `--resync` copies a table: one round trip for many rows.
const RESYNC_CHUNK_ROWS: usize = 1000;

/// What a `--resync` did to one table.
#[derive(Debug, Default, Clone, Copy)]
pub struct Resynced {
    /// The till's live rows, each upserted (unchanged values keep their row and lsn).
    pub rows: u64,
    /// Rows PostgreSQL held for this till that the till no longer has, deleted.
    pub deleted: u64,
}

/// Makes PostgreSQL's `table` for this till equal to `entries` (the till's table in one
/// snapshot, keys in order): upserts every entry with `lsn`, the snapshot's, then deletes
/// the till's other keys. Requires: the caller locked the watermark in this transaction.
pub fn resync_table(
    pg: &mut Transaction<'_>,
    till_id: &str,
    table: &str,
    entries: impl Iterator<Item = tilldb::Result<(Vec<u8>, Vec<u8>)>>,
    lsn: Lsn,
) -> Result<Resynced, Failure> {
    let name = pg_table_or_fail(table)?;
    // The snapshot's keys, to find those PostgreSQL holds beyond them; dropped at commit.
    pg.batch_execute(
        "CREATE TEMP TABLE IF NOT EXISTS tilldb_resync_keys (key bytea PRIMARY KEY)
             ON COMMIT DROP;
         TRUNCATE tilldb_resync_keys",
    )?;
    let upsert = pg.prepare(&format!(
        "INSERT INTO {name} (till_id, key, value, lsn)
         SELECT $1, k, v, $4 FROM unnest($2::bytea[], $3::bytea[]) AS u(k, v)
         ON CONFLICT (till_id, key) DO UPDATE SET value = EXCLUDED.value, lsn = EXCLUDED.lsn
         WHERE {name}.value IS DISTINCT FROM EXCLUDED.value"
    ))?;
    let remember = pg.prepare("INSERT INTO tilldb_resync_keys SELECT unnest($1::bytea[])")?;
    let mut done = Resynced::default();
    let mut entries = entries.peekable();
    while entries.peek().is_some() {
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(RESYNC_CHUNK_ROWS);
        let mut values: Vec<Vec<u8>> = Vec::with_capacity(RESYNC_CHUNK_ROWS);
        for entry in entries.by_ref().take(RESYNC_CHUNK_ROWS) {
            let (key, value) = entry?;
            keys.push(key);
            values.push(value);
        }
        assert!(keys.len() <= RESYNC_CHUNK_ROWS);
        pg.execute(&upsert, &[&till_id, &keys, &values, &pg_lsn(lsn)])?;
        pg.execute(&remember, &[&keys])?;
        done.rows += keys.len() as u64;
    }
    done.deleted = pg.execute(
        &format!(
            "DELETE FROM {name} AS t WHERE t.till_id = $1
             AND NOT EXISTS (SELECT 1 FROM tilldb_resync_keys AS r WHERE r.key = t.key)"
        ),
        &[&till_id],
    )?;
    Ok(done)
}

/// Deletes this till's rows from the shipped tables (`tilldb_*` with a `till_id` column)
/// that are not among `kept` (the PostgreSQL names of the till's tables, quoted): tables the
/// till dropped. Returns the rows deleted.
pub fn delete_other_tables(
    pg: &mut Transaction<'_>,
    till_id: &str,
    kept: &[String],
) -> Result<u64, Failure> {
    let tables = pg.query(
        "SELECT c.table_name FROM information_schema.columns AS c
         WHERE c.table_schema = current_schema() AND c.column_name = 'till_id'
         AND c.table_name LIKE 'tilldb\\_%' AND c.table_name <> 'tilldb_watermark'",
        &[],
    )?;
    let mut deleted = 0;
    for row in tables {
        let table_name: String = row.get(0);
        let quoted = format!("\"{}\"", table_name.replace('"', "\"\""));
        if kept.contains(&quoted) {
            continue;
        }
        deleted += pg.execute(
            &format!("DELETE FROM {quoted} WHERE till_id = $1"),
            &[&till_id],
        )?;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_map_quoted_and_too_long_ones_are_refused() {
        assert_eq!(pg_table("").as_deref(), Ok("\"tilldb_default\""));
        assert_eq!(pg_table("sales").as_deref(), Ok("\"tilldb_sales\""));
        assert_eq!(pg_table("a\"b").as_deref(), Ok("\"tilldb_a\"\"b\""));
        assert!(pg_table(&"x".repeat(57)).is_err());
        assert!(pg_table(&"x".repeat(56)).is_ok());
    }
}
