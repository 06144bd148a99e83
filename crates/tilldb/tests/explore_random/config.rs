//! What one seed runs: the database and device configuration, the fault schedule of each
//! crash cycle, and the commits of each committing thread, all drawn from the seed.
//!
//! Nothing here depends on timing: the seed fixes the configuration, the schedules and every
//! commit's contents. Which commits a crash keeps depends on how the threads interleave,
//! which the seed does not fix (background threads run, the threads race).

use std::fmt;
use std::time::Duration;
use tilldb::TornPageGuard;
use tilldb::io::{Fault, FaultKind, IoKind, SimConfig};
use tilldb::{Durability, FlushMethod, Options};

/// A small seeded generator (splitmix64): the tests need no crate for it.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_F42D_4C95_7F2D)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.next_u64() % n
    }

    /// A number in `low..=high`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        assert!(low <= high, "range {low}..={high}");
        low + self.below(high - low + 1)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        let len = u64::try_from(items.len()).expect("few items");
        items[usize::try_from(self.below(len)).expect("index fits")]
    }
}

/// A seed for a sub-stream: different for every `(seed, a, b)`.
pub fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut rng = Rng::new(seed ^ a.wrapping_mul(0xD6E8_FEB8_6659_FD93));
    rng.next_u64() ^ b.wrapping_mul(0xA076_1D64_78BD_642F)
}

/// How often each durability level is chosen, in percent (the rest is `Lazy`).
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    pub sync: u64,
    pub buffered: u64,
}

/// Everything one seed fixes about the database, the device and the workload.
#[derive(Debug, Clone)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each is an independent draw of the seed, not a state"
)]
pub struct Config {
    pub seed: u64,
    /// Committing threads, 1 to 8; thread `t` writes only its own table.
    pub threads: usize,
    pub page_bytes: u32,
    pub cache_pages: u32,
    pub guard: TornPageGuard,
    pub flush_method: FlushMethod,
    /// A 4K-native device (4 KiB sectors and direct-I/O alignment, 4 KiB log blocks).
    pub four_k: bool,
    pub segment_bytes: u64,
    /// The log's first segment (`WalOptions::first_segment_bytes`): half the seeds start at
    /// an eighth of `segment_bytes` and grow (drawn from its own stream, so the other draws
    /// of a seed are the ones they were before this field).
    pub first_segment_bytes: u64,
    /// A checkpoint runs after this many segments of log.
    pub checkpoint_segments: u64,
    pub flush_interval: Duration,
    pub adaptive_gather: bool,
    /// The engine's background threads (write-back, log flusher, segment preparer). Always
    /// on with more than one committing thread.
    pub background: bool,
    pub mix: Mix,
    /// Percent of commits a thread precedes with an explicit checkpoint.
    pub checkpoint_percent: u64,
    /// Keys per table.
    pub key_space: u64,
    /// Crash, recover, check, go on: this many times.
    pub cycles: u64,
    /// Commits each thread attempts per cycle.
    pub commits_per_thread: u64,
    /// Crash states made from every crash point, one per fork of the dead disk.
    pub forks: u64,
    /// An encrypted database (docs/encryption.md): a quarter of the seeds, drawn from its own
    /// stream so that the other draws of a seed are the ones they were before this field.
    pub encrypted: bool,
}

const GUARDS: [TornPageGuard; 4] = [
    TornPageGuard::Doublewrite,
    TornPageGuard::FullPageImages,
    TornPageGuard::Atomic,
    TornPageGuard::None,
];

impl Config {
    pub fn from_seed(seed: u64) -> Config {
        let mut rng = Rng::new(seed);
        let threads = usize::try_from(rng.range(1, 8)).expect("small");
        let page_bytes = rng.pick(&[4096, 8192, 16384]);
        let four_k = rng.chance(20);
        // `None` (the negative control) in one seed of ten.
        let guard = if rng.chance(10) {
            TornPageGuard::None
        } else {
            rng.pick(&GUARDS[..3])
        };
        // One record must fit a segment: a commit holds at most one value of up to two pages,
        // and under full-page images it logs each page it changes whole (a dozen or so).
        let pages_per_record = if guard == TornPageGuard::FullPageImages {
            24
        } else {
            8
        };
        let floor = (u64::from(page_bytes) * pages_per_record).max(if four_k {
            64 << 10
        } else {
            16 << 10
        });
        let segment_bytes = rng.pick(&[16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10]);
        let mix = rng.pick(&[
            Mix {
                sync: 100,
                buffered: 0,
            },
            Mix {
                sync: 50,
                buffered: 30,
            },
            Mix {
                sync: 20,
                buffered: 60,
            },
            Mix {
                sync: 30,
                buffered: 10,
            },
            Mix {
                sync: 34,
                buffered: 33,
            },
        ]);
        Config {
            seed,
            threads,
            page_bytes,
            cache_pages: u32::try_from(rng.range(8, 20)).expect("small"),
            guard,
            flush_method: rng.pick(&FlushMethod::DURABLE),
            four_k,
            segment_bytes: segment_bytes.max(floor),
            first_segment_bytes: if self::mix(seed, 0x6707, 0).is_multiple_of(2) {
                segment_bytes.max(floor) / 8
            } else {
                segment_bytes.max(floor)
            },
            checkpoint_segments: rng.range(1, 4),
            flush_interval: Duration::from_millis(rng.range(1, 10)),
            adaptive_gather: rng.chance(50),
            background: threads > 1 || rng.chance(60),
            mix,
            checkpoint_percent: rng.pick(&[0, 2, 5]),
            key_space: rng.range(20, 400),
            cycles: rng.range(3, 4),
            commits_per_thread: (rng.range(24, 72) / threads as u64).max(6),
            forks: rng.range(5, 7),
            encrypted: self::mix(seed, 0xE4C2, 0).is_multiple_of(4),
        }
    }

    /// The options of a run; `background` overrides the seed's choice.
    pub fn options(&self, background: bool) -> Options {
        let defaults = Options::for_tests();
        Options {
            page_bytes: Some(self.page_bytes),
            cache_bytes: u64::from(self.cache_pages) * u64::from(self.page_bytes),
            flush_method: Some(self.flush_method),
            torn_page_guard: self.guard,
            checkpoint_log_bytes: self.segment_bytes * self.checkpoint_segments,
            wal: tilldb::WalOptions {
                segment_bytes: self.segment_bytes,
                first_segment_bytes: self.first_segment_bytes,
                // Closes trim the log in the seeds whose segments grow.
                close_trim_bytes: if self.first_segment_bytes < self.segment_bytes {
                    0
                } else {
                    8 << 20
                },
                log_block_bytes: if self.four_k {
                    None
                } else {
                    defaults.wal.log_block_bytes
                },
                flush_interval: self.flush_interval,
                adaptive_gather: self.adaptive_gather,
                ..defaults.wal.clone()
            },
            background_threads: background,
            encryption: self
                .encrypted
                .then(|| tilldb::internals::crypt::Encryption {
                    provider: std::sync::Arc::new(tilldb::internals::crypt::StaticKey::new(
                        &[0x4e; 32],
                    )),
                    cipher: tilldb::internals::crypt::Cipher::Aes256Gcm,
                }),
            ..defaults
        }
    }

    pub fn sim(&self) -> SimConfig {
        let device = if self.four_k {
            SimConfig::four_k_native()
        } else {
            SimConfig::default()
        };
        SimConfig {
            seed: self.seed,
            // The atomic guard needs a device that writes a page atomically.
            atomic_write_unit: (self.guard == TornPageGuard::Atomic).then_some((4096, 65536)),
            ..device
        }
    }

    /// The table thread `thread` writes: the default table for thread 0.
    pub fn table(thread: usize) -> String {
        if thread == 0 {
            String::new()
        } else {
            format!("t{thread}")
        }
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} ({} threads, {} B pages, cache {} pages, guard {}, {}, {}, segments {} KiB from {} KiB, \
             checkpoint every {} segments, flush interval {:?}, gather {}, background {}, \
             sync {}% buffered {}%, explicit checkpoints {}%, {} keys, {} cycles of {} commits \
             per thread, {} forks per crash{})",
            self.seed,
            self.threads,
            self.page_bytes,
            self.cache_pages,
            self.guard,
            self.flush_method,
            if self.four_k { "4K-native" } else { "512e" },
            self.segment_bytes >> 10,
            self.first_segment_bytes >> 10,
            self.checkpoint_segments,
            self.flush_interval,
            self.adaptive_gather,
            self.background,
            self.mix.sync,
            self.mix.buffered,
            self.checkpoint_percent,
            self.key_space,
            self.cycles,
            self.commits_per_thread,
            self.forks,
            if self.encrypted { ", encrypted" } else { "" }
        )
    }
}

/// The faults of one cycle: maybe an error first (the engine must then stop acknowledging),
/// maybe a crash at the k-th call of a kind (else the crash comes when the threads are done),
/// and how many crash points are taken while the threads run.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub error: Option<Fault>,
    pub crash: Option<Fault>,
    pub snapshots: u64,
}

impl Schedule {
    pub fn of(config: &Config, cycle: u64) -> Schedule {
        let mut rng = Rng::new(mix(config.seed, 1, cycle));
        let error = rng.chance(25).then(|| {
            let kind = rng.pick(&[
                IoKind::Write,
                IoKind::Write,
                IoKind::Flush,
                IoKind::Flush,
                IoKind::Create,
                IoKind::SetLen,
                IoKind::Rename,
                IoKind::FlushDir,
            ]);
            let error = match kind {
                IoKind::Flush => rng.pick(&[FaultKind::Eio, FaultKind::FlushLosesData]),
                IoKind::Write => {
                    rng.pick(&[FaultKind::Eio, FaultKind::Enospc, FaultKind::ShortWrite])
                }
                _ => rng.pick(&[FaultKind::Eio, FaultKind::Enospc]),
            };
            let nth = rng.range(1, 40);
            on_some_path(&mut rng, Fault::once(kind, nth, error))
        });
        let crash = (!rng.chance(15)).then(|| {
            // Most cycles make 20-100 writes, 10-80 flushes (none with write-through
            // methods), and a segment switch or two.
            let (kind, high) = rng.pick(&[
                (IoKind::Write, 120),
                (IoKind::Write, 60),
                (IoKind::Write, 20),
                (IoKind::Flush, 60),
                (IoKind::Flush, 30),
                (IoKind::Flush, 10),
                (IoKind::FlushDir, 2),
                (IoKind::Create, 1),
                (IoKind::Rename, 1),
                (IoKind::SetLen, 2),
            ]);
            let nth = rng.range(1, high);
            on_some_path(&mut rng, Fault::once(kind, nth, FaultKind::Crash))
        });
        Schedule {
            error,
            crash,
            snapshots: rng.range(0, 3),
        }
    }
}

/// Narrows a fault to one file in a quarter of the cases.
fn on_some_path(rng: &mut Rng, fault: Fault) -> Fault {
    if rng.chance(75) {
        return fault;
    }
    let path = rng.pick(&["data.tdb", "doublewrite.tdb", "wal", "tilldb.meta"]);
    fault.on_path(path)
}

/// One change of a commit to its thread's table: key, new value (`None`: delete).
pub type Op = (Vec<u8>, Option<Vec<u8>>);

/// One commit of one thread.
#[derive(Debug, Clone)]
pub struct Commit {
    pub ops: Vec<Op>,
    pub durability: Durability,
    /// An explicit checkpoint runs before this commit.
    pub checkpoint_before: bool,
}

/// The key under which every thread's table keeps how many of its commits it holds: each
/// prefix of a thread's commits is a different state, and recovery tells which one it kept.
pub const COUNT_KEY: &[u8] = b"#count";

/// Commit number `index` of thread `thread` in cycle `cycle`: a few puts and deletes, values
/// of a few bytes to two pages, then the thread's commit count.
pub fn commit(config: &Config, thread: usize, cycle: u64, index: usize) -> Commit {
    let mut rng = Rng::new(mix(
        config.seed,
        2 + thread as u64,
        (cycle << 32) | index as u64,
    ));
    let page = u64::from(config.page_bytes);
    let mut large = false;
    let mut ops: Vec<Op> = (0..rng.range(1, 8))
        .map(|op| {
            let key = format!("k{:05}", rng.below(config.key_space)).into_bytes();
            if rng.chance(20) {
                return (key, None);
            }
            // At most one value of half a page to two pages (overflow pages) per commit.
            let len = match rng.below(100) {
                96.. if !large => {
                    large = true;
                    rng.range(page / 2, page * 2)
                }
                0..70 => rng.range(8, 200),
                _ => rng.range(200, 1500),
            };
            let mut value = format!("t{thread}c{cycle}i{index}o{op}-").into_bytes();
            let fill = b'a' + u8::try_from(rng.below(26)).expect("small");
            value.resize(usize::try_from(len).expect("small").max(value.len()), fill);
            (key, Some(value))
        })
        .collect();
    ops.push((
        COUNT_KEY.to_vec(),
        Some((index + 1).to_string().into_bytes()),
    ));
    let roll = rng.below(100);
    let durability = if roll < config.mix.sync {
        Durability::Sync
    } else if roll < config.mix.sync + config.mix.buffered {
        Durability::Buffered
    } else {
        Durability::Lazy
    };
    Commit {
        ops,
        durability,
        checkpoint_before: rng.chance(config.checkpoint_percent),
    }
}
