//! A PostgreSQL 15 server of a test's own (Debian's postgresql-15: `initdb` in a temporary
//! directory, `pg_ctl` on a free port), for the `till ship` tests. Included by path, so only
//! the test binaries that ship compile it.

#![allow(
    dead_code,
    reason = "each test binary that includes it uses a different subset"
)]

use crate::common::skip_missing;
use postgres::{Client, NoTls};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A PostgreSQL server of this test's own, stopped when dropped.
pub struct Postgres {
    data: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

/// Runs a PostgreSQL tool; as root through the `postgres` user, as PostgreSQL refuses root.
fn pg_tool(tool: &str, args: &[&str]) -> Result<String, String> {
    let program = Path::new(PG_BIN).join(tool);
    let mut command = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&program);
        c
    } else {
        Command::new(&program)
    };
    let out = command
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{tool} {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Postgres {
    /// Starts a server, or says why it cannot (`skip_missing`: a failure under CI).
    pub fn start(test: &str) -> Option<Postgres> {
        if !Path::new(PG_BIN).join("initdb").exists() {
            skip_missing(
                test,
                "PostgreSQL 15 is not installed (apt-get install postgresql-15)",
            );
            return None;
        }
        // In the system's temporary directory: the `postgres` user must reach it, and a
        // checkout under a private home directory (mode 700) would be out of its reach.
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        if is_root() {
            let chown = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(chown.success(), "chown the server's directory to postgres");
        }
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            probe.local_addr().expect("addr").port()
        };
        let data_arg = data.to_str().expect("utf-8").to_owned();
        if let Err(e) = pg_tool(
            "initdb",
            &[
                "-D",
                &data_arg,
                "-U",
                "tilldb",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
        ) {
            skip_missing(test, &format!("initdb failed: {e}"));
            return None;
        }
        let server = Postgres {
            data,
            port,
            _dir: dir,
        };
        if let Err(e) = server.ctl(&["start"]) {
            skip_missing(test, &format!("PostgreSQL does not start: {e}"));
            return None;
        }
        Some(server)
    }

    fn ctl(&self, action: &[&str]) -> Result<String, String> {
        let data = self.data.to_str().expect("utf-8").to_owned();
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.data.display()
        );
        let log = self.data.join("server.log");
        let mut args = vec!["-D", &data, "-o", &opts, "-w", "-t", "60"];
        let log = log.to_str().expect("utf-8").to_owned();
        args.extend_from_slice(&["-l", &log]);
        args.extend_from_slice(action);
        pg_tool("pg_ctl", &args)
    }

    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    /// The URL of database `database` on this server.
    pub fn url_of(&self, database: &str) -> String {
        format!("postgresql://tilldb@127.0.0.1:{}/{database}", self.port)
    }

    /// A crash and restart: no shutdown checkpoint, connections cut.
    pub fn crash_restart(&self) {
        self.ctl(&["restart", "-m", "immediate"])
            .expect("PostgreSQL restarts");
    }

    /// Stops the server (a fast shutdown): connections are refused until [`Self::start_again`].
    pub fn stop(&self) {
        self.ctl(&["stop", "-m", "fast"]).expect("PostgreSQL stops");
    }

    /// Starts the server [`Self::stop`] stopped.
    pub fn start_again(&self) {
        self.ctl(&["start"]).expect("PostgreSQL starts again");
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.url(), NoTls).expect("connect")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.ctl(&["stop", "-m", "immediate"]);
    }
}

/// The shipper's tables made ahead of it (with the documented schema, `till ship`'s module
/// doc) with a trigger that records every row write: a transaction applied twice shows as the
/// same (table, till, key, lsn) twice, which the final state alone would hide (a repeated
/// upsert converges).
pub fn audit_applications(client: &mut Client) {
    client
        .batch_execute(
            "CREATE TABLE audit (tbl text, till_id text, key bytea, lsn bigint);
             CREATE FUNCTION audit_write() RETURNS trigger AS $$
             BEGIN
                 INSERT INTO audit VALUES (TG_TABLE_NAME, NEW.till_id, NEW.key, NEW.lsn);
                 RETURN NEW;
             END $$ LANGUAGE plpgsql;
             CREATE TABLE tilldb_sales (till_id text NOT NULL, key bytea NOT NULL,
                 value bytea NOT NULL, lsn bigint NOT NULL, PRIMARY KEY (till_id, key));
             CREATE TABLE tilldb_totals (till_id text NOT NULL, key bytea NOT NULL,
                 value bytea NOT NULL, lsn bigint NOT NULL, PRIMARY KEY (till_id, key));
             CREATE TRIGGER audit_sales AFTER INSERT OR UPDATE ON tilldb_sales
                 FOR EACH ROW EXECUTE FUNCTION audit_write();
             CREATE TRIGGER audit_totals AFTER INSERT OR UPDATE ON tilldb_totals
                 FOR EACH ROW EXECUTE FUNCTION audit_write();",
        )
        .expect("audit tables");
}
