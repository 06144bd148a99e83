//! A gate for tests that hold a storage call (a log flush, a write) at an exact point:
//! `arm(n)` holds the next `n` calls that `pass` through it, each until one `release`.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tilldb::io::{Call, Hooks};

/// Holds log-file flushes: `arm(n)` holds the next `n`, each until one `release`.
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    to_hold: usize,
    held: usize,
    releases: usize,
}

impl Gate {
    pub fn arm(&self, flushes: usize) {
        self.state.lock().expect("gate").to_hold += flushes;
    }

    /// In a flush: waits for a release if this flush is one to hold.
    pub fn pass(&self) {
        let mut st = self.state.lock().expect("gate");
        if st.to_hold == 0 {
            return;
        }
        st.to_hold -= 1;
        st.held += 1;
        self.changed.notify_all();
        while st.releases == 0 {
            st = self.changed.wait(st).expect("gate");
        }
        st.releases -= 1;
        st.held -= 1;
        self.changed.notify_all();
    }

    /// Waits until a flush is held at the gate.
    pub fn wait_held(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut st = self.state.lock().expect("gate");
        while st.held == 0 || st.releases > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no flush reached the gate in 10 s");
            st = self.changed.wait_timeout(st, left).expect("gate").0;
        }
    }

    pub fn release(&self) {
        self.state.lock().expect("gate").releases += 1;
        self.changed.notify_all();
    }
}

/// Hooks that hold the log files' flushes at a gate.
#[derive(Debug)]
pub struct FlushGate(pub Arc<Gate>);

impl Hooks for FlushGate {
    fn before(&self, call: &Call<'_>) -> tilldb::Result<()> {
        if matches!(call, Call::Flush { .. }) && call.path().extension().is_some_and(|e| e == "wal")
        {
            self.0.pass();
        }
        Ok(())
    }
}
