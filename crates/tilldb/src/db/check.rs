//! `Db::check` and `Db::check_tables`: every tree of the database checked against its
//! catalog entry (order, links, page kinds, overflow chains, row counts).

use super::{CATALOG_ROOT, Db, catalog_root_of, counts, drop};
use crate::btree::{Direction, Tree};
use crate::error::{Error, Result};

impl Db {
    /// Checks the default table's tree (order, links, page kinds) and returns its statistics.
    /// Every table's tree and the catalog are checked; the default table's stats are returned.
    pub fn check(&self) -> Result<crate::btree::TreeStats> {
        let tables = self.check_tables()?;
        Ok(tables
            .into_iter()
            .find(|(name, _)| name.is_empty())
            .expect("the default table")
            .1)
    }

    /// Checks the catalog and every table's tree (key order, separators, leaf links, page
    /// kinds, overflow chains); returns each table's statistics, the default table as `""`.
    /// Trees of dropped tables not yet reclaimed are checked too, not returned.
    pub fn check_tables(&self) -> Result<Vec<(String, crate::btree::TreeStats)>> {
        let _shared = self.inner.tree_lock.read();
        let pages = self.read_pages();
        Tree::open(CATALOG_ROOT).check(&pages)?;
        for root in drop::graveyard_roots(&pages)? {
            Tree::open(root).check(&pages)?;
        }
        let entries: Vec<(Vec<u8>, Vec<u8>)> = Tree::open(CATALOG_ROOT)
            .scan(
                &pages,
                counts::names_lower(),
                drop::names_upper(),
                Direction::Forward,
            )
            .collect::<Result<_>>()?;
        let default = Tree::open(CATALOG_ROOT)
            .get(&pages, counts::key_of(""))?
            .ok_or_else(|| Error::Corruption {
                file: self.inner.data_path.clone(),
                offset: CATALOG_ROOT.offset(self.inner.pool.page_bytes()),
                what: "the catalog has no entry for the default table",
            })?;
        let mut stats = Vec::new();
        for (name, value) in std::iter::once((Vec::new(), default)).chain(entries) {
            let root =
                catalog_root_of(&value, &self.inner.data_path, self.inner.pool.page_bytes())?;
            let tree = Tree::open(root).check(&pages)?;
            // The count kept with the table is the number of its entries (`counts.rs`).
            let rows = counts::rows_of(&value).map_err(|what| Error::Corruption {
                file: self.inner.data_path.clone(),
                offset: CATALOG_ROOT.offset(self.inner.pool.page_bytes()),
                what,
            })?;
            if rows.is_some_and(|rows| rows != tree.keys) {
                return Err(Error::Corruption {
                    file: self.inner.data_path.clone(),
                    offset: root.offset(self.inner.pool.page_bytes()),
                    what: "a table's row count (its catalog entry) differs from the entries \
                           its tree holds",
                });
            }
            stats.push((String::from_utf8_lossy(&name).into_owned(), tree));
        }
        Ok(stats)
    }
}
