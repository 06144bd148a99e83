//! An embedder sees what the database does through `tracing` (issue 22): an event at open
//! with the recovery report, at each checkpoint, at each log segment switch, and when a
//! failure stops the database. A minimal subscriber records every event's message and
//! fields; with the background threads off every event comes on the calling thread, where
//! `with_default` installs it.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tilldb::io::{Fault, FaultKind, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Options};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One event: its level, message and other fields as text.
#[derive(Debug, Clone)]
struct Seen {
    level: tracing::Level,
    message: String,
    fields: String,
}

#[derive(Debug, Default, Clone)]
struct Recorder {
    events: Arc<Mutex<Vec<Seen>>>,
    spans: Arc<Mutex<Vec<String>>>,
}

struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            let _ = write!(self.rest, "{}={value:?} ", field.name());
        }
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut spans = self.spans.lock().expect("recorder");
        spans.push(span.metadata().name().to_owned());
        Id::from_u64(spans.len() as u64)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields {
            message: String::new(),
            rest: String::new(),
        };
        event.record(&mut fields);
        self.events.lock().expect("recorder").push(Seen {
            level: *event.metadata().level(),
            message: fields.message,
            fields: fields.rest,
        });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

impl Recorder {
    fn find(&self, message: &str) -> Vec<Seen> {
        self.events
            .lock()
            .expect("recorder")
            .iter()
            .filter(|e| e.message.contains(message))
            .cloned()
            .collect()
    }
}

fn options() -> Options {
    Options {
        background_threads: false,
        checkpoint_log_bytes: 1 << 20,
        ..Options::for_tests()
    }
}

#[test]
fn open_recovery_checkpoints_segment_switches_and_a_stop_are_traced() {
    let disk = SimDisk::new(SimConfig::default());
    let dir = Path::new("/db");
    let recorder = Recorder::default();
    tracing::subscriber::with_default(recorder.clone(), || {
        let db = Db::open_with_storage(Arc::new(disk.clone()), dir, options()).expect("create");
        // About 3 MiB of log: segment switches (1 MiB segments) and checkpoints (every 1 MiB).
        for i in 0..2_500u32 {
            let mut txn = db.begin().expect("begin");
            txn.put(format!("key-{:05}", i % 300).as_bytes(), &[7; 1_200])
                .expect("put");
            txn.commit().expect("commit");
        }
        drop(db);
        disk.crash(tilldb::io::CrashMode::ProcessKill);
        let db = Db::open_with_storage(Arc::new(disk.clone()), dir, options()).expect("recover");
        // Then a failed flush stops it.
        disk.inject(Fault::once(IoKind::Flush, 1, FaultKind::Eio));
        let mut txn = db.begin().expect("begin");
        txn.put(b"last", b"fails").expect("put");
        assert!(txn.commit().is_err(), "the commit's flush failed");
    });

    let opened = recorder.find("database opened");
    assert_eq!(opened.len(), 2, "{opened:?}");
    assert!(opened[0].fields.contains("created=true"), "{opened:?}");
    assert!(opened[1].fields.contains("created=false"), "{opened:?}");
    assert!(
        opened[1].fields.contains("records_replayed="),
        "the recovery report is in the event: {opened:?}"
    );
    let spans = recorder.spans.lock().expect("recorder").clone();
    assert_eq!(
        spans.iter().filter(|s| *s == "tilldb.open").count(),
        2,
        "{spans:?}"
    );
    let checkpoints = recorder.find("checkpoint");
    assert!(
        checkpoints
            .iter()
            .any(|e| e.message == "checkpoint" && e.fields.contains("redo_lsn=")),
        "{checkpoints:?}"
    );
    let switches = recorder.find("log segment switch");
    assert!(switches.len() >= 2, "{switches:?}");
    let stops: Vec<Seen> = recorder
        .events
        .lock()
        .expect("recorder")
        .iter()
        .filter(|e| e.level == tracing::Level::ERROR)
        .cloned()
        .collect();
    assert!(
        stops
            .iter()
            .any(|e| e.message.contains("fail-stop") && e.fields.contains("cause=")),
        "{stops:?}"
    );
}
