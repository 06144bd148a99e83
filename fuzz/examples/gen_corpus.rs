//! Writes the seed corpus, `fuzz/corpus/<target>/`, from a real database's files (the base
//! images of `src/base.rs`) and from a tree built on `MemPages`. Run by hand when a format
//! changes (the corpus is committed):
//!
//! ```text
//! cd fuzz && cargo +nightly run --release --example gen_corpus
//! ```
//!
//! Each seed is written in its target's input format (see the top of each target's file).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use tilldb::internals::btree::{MemPages, Tree};
use tilldb::internals::page::{PageBuf, PageId};
use tilldb::internals::wal::{LogEvent, RecordKind};
use tilldb_fuzz::base::{self, BLOCK_BYTES, Edit, images};
use tilldb_fuzz::{PAGE_HEADER_BYTES, SEGMENT_HEADER_BYTES};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let [crash, clean] = images();
    for (name, image) in [("crash", crash), ("clean", clean)] {
        for (path, bytes) in image {
            let len = bytes.as_ref().map(Vec::len);
            println!("base image {name}: {} {len:?}", path.display());
        }
    }
    let mut seeds: BTreeMap<&str, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    let file = |image: &base::Image, name: &str| -> Vec<u8> {
        image
            .iter()
            .find(|(p, _)| p.to_string_lossy().ends_with(name))
            .and_then(|(_, b)| b.clone())
            .expect("the base image has the file")
    };
    let segments: Vec<(PathBuf, Vec<u8>)> = crash
        .iter()
        .filter(|(p, b)| p.extension().is_some_and(|e| e == "wal") && b.is_some())
        .map(|(p, b)| (p.clone(), b.clone().expect("present")))
        .collect();

    // wal_record: records of a real segment, at the record's position; and commit_record:
    // the payloads of real commit records.
    let mut records = Vec::new();
    let _ = tilldb::internals::wal::inspect_log(
        &*base::lay_down(crash),
        &Path::new(base::DIR).join("wal"),
        None,
        |event| {
            if let LogEvent::Record { offset, record } = event {
                records.push((offset, record.lsn, record.kind, record.payload.to_vec()));
            }
        },
    );
    let (segment_path, segment) = &segments[0];
    let generation: u64 = segment_path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("a segment name");
    let base_lsn = u64::from_le_bytes(segment[32..40].try_into().expect("8 bytes"));
    let in_first: Vec<_> = records
        .iter()
        .filter(|(offset, lsn, _, _)| *lsn >= base_lsn && *lsn < base_lsn + 8192 && *offset >= 512)
        .collect();
    let mut wal = Vec::new();
    for (n, (offset, lsn, kind, _)) in in_first.iter().take(3).enumerate() {
        let mut seed = generation.to_le_bytes().to_vec();
        seed.extend(lsn.to_le_bytes());
        // The first seed also lays out the segment as a log directory (flags bit 1).
        seed.push(if n == 0 { 2 } else { 0 });
        seed.push(0);
        let at = usize::try_from(*offset).expect("small");
        let end = if n == 0 {
            segment.len()
        } else {
            (at + 512).min(segment.len())
        };
        seed.extend(&segment[at..end]);
        wal.push((format!("record-{n}-{kind:?}"), seed));
    }
    seeds.insert("wal_record", wal);
    let commits: Vec<_> = records
        .iter()
        .filter(|(_, _, kind, payload)| *kind == RecordKind::Data && payload.len() < 4096)
        .take(4)
        .enumerate()
        .map(|(n, (_, _, _, payload))| (format!("commit-{n}"), payload.clone()))
        .collect();
    seeds.insert("commit_record", commits);

    // segment_header: the first block of real segments.
    let headers = segments
        .iter()
        .take(2)
        .enumerate()
        .map(|(n, (_, bytes))| {
            let mut seed = vec![0u8];
            seed.extend(&bytes[..SEGMENT_HEADER_BYTES.max(64)]);
            (format!("segment-{n}"), seed)
        })
        .collect();
    seeds.insert("segment_header", headers);

    // header_slot: the header files of both variants.
    seeds.insert(
        "header_slot",
        [("crash", crash), ("clean", clean)]
            .into_iter()
            .map(|(name, image)| {
                let mut seed = vec![0u8];
                seed.extend(file(image, "tilldb.meta"));
                (format!("meta-{name}"), seed)
            })
            .collect(),
    );

    // page: real pages of the data file (raw mode), and a tree on MemPages (tree mode).
    let data = file(clean, "data.tdb");
    let mut pages = Vec::new();
    let mut kinds_seen = Vec::new();
    for id in 1..data.len() / BLOCK_BYTES {
        let bytes = &data[id * BLOCK_BYTES..(id + 1) * BLOCK_BYTES];
        let kind = bytes[4];
        if bytes.iter().all(|&b| b == 0) || kinds_seen.contains(&kind) {
            continue;
        }
        kinds_seen.push(kind);
        let mut seed = vec![0u8, 0u8];
        seed.extend((id as u64).to_le_bytes());
        seed.extend(bytes);
        pages.push((format!("page-{id}-kind-{kind}"), seed));
    }
    pages.extend(tree_seeds());
    seeds.insert("page", pages);

    // open_files: the plain databases, and a few damages of the kinds the edits make.
    let open = vec![
        ("crash-as-is".to_owned(), vec![0u8]),
        ("clean-as-is".to_owned(), vec![1u8]),
        (
            "crash-stale-page".to_owned(),
            edits(
                0,
                &[Edit::CopyBlock {
                    file: 1,
                    block: 3,
                    source_file: 1,
                    source_block: 2,
                }],
            ),
        ),
        (
            "clean-resealed-slot".to_owned(),
            edits(
                1,
                &[
                    Edit::Xor {
                        file: 0,
                        offset: 32,
                        mask: 0x10,
                    },
                    Edit::Reseal { file: 0, index: 0 },
                    Edit::Xor {
                        file: 0,
                        offset: 4096 + 32,
                        mask: 0x10,
                    },
                    Edit::Reseal { file: 0, index: 1 },
                ],
            ),
        ),
        (
            "crash-torn-log".to_owned(),
            edits(0, &[Edit::ZeroSector { file: 4, sector: 3 }]),
        ),
    ];
    seeds.insert("open_files", open);

    for (target, files) in &seeds {
        let dir = root.join(target);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("corpus directory");
        for (name, bytes) in files {
            fs::write(dir.join(name), bytes).expect("write a seed");
        }
        println!("{target}: {} seeds", files.len());
    }
}

fn edits(variant: u8, edits: &[Edit]) -> Vec<u8> {
    let mut out = vec![variant];
    for edit in edits {
        out.extend(edit.encode());
    }
    out
}

/// Tree-mode seeds of the page target: a one-leaf tree, a root branch over leaves, and a
/// leaf with a value in an overflow chain, each on pages 1..=4.
fn tree_seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let shapes: [(&str, Vec<(Vec<u8>, Vec<u8>)>); 3] = [
        (
            "leaf",
            (0..20)
                .map(|i| (format!("k{i:03}").into_bytes(), vec![b'v'; 30]))
                .collect(),
        ),
        (
            "branch",
            (0..70)
                .map(|i| (format!("key{i:04}").into_bytes(), vec![b'w'; 90]))
                .collect(),
        ),
        (
            "overflow",
            vec![
                (b"big".to_vec(), vec![b'o'; 6000]),
                (b"small".to_vec(), b"s".to_vec()),
            ],
        ),
    ];
    for (name, entries) in shapes {
        let mem = MemPages::new(4096);
        let tree = Tree::create(&mem).expect("create");
        for (key, value) in &entries {
            tree.put(&mem, key, value).expect("put");
        }
        let snapshot = mem.snapshot();
        if snapshot.len() > 4 || snapshot.keys().any(|id| id.0 > 4) {
            eprintln!("tree seed {name}: {} pages, skipped", snapshot.len());
            continue;
        }
        let mut seed = vec![2u8, u8::try_from(snapshot.len() - 1).expect("at most 4")];
        let mut kinds = [0u8; 4];
        let mut bodies: Vec<u8> = Vec::new();
        for id in 1..=snapshot.len() as u64 {
            let page: &PageBuf = &snapshot[&PageId(id)];
            kinds[usize::try_from(id - 1).expect("small")] = page.kind() as u8;
            bodies.extend(&page.bytes()[PAGE_HEADER_BYTES..]);
        }
        seed.extend(kinds);
        seed.extend(bodies);
        out.push((format!("tree-{name}"), seed));
    }
    out
}
