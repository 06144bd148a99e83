//! The database header file and its two slots (`header.rs`).
//!
//! Input:
//!
//! ```text
//! offset size field
//!      0    1 flags   bit 0: seal slot 0 (crc at 4092, seeded with 0); bit 1: seal slot 1
//!      1    … bytes   tilldb.meta: slot 0 at 0, slot 1 at 4096 (a shorter file reads as
//!                     zero-padded; the file on the SimDisk has exactly these bytes)
//! ```
//!
//! Checks: `Header::decode` never panics; a slot it accepts encodes back to the same 4096
//! bytes; `choose_slot` follows its table; `HeaderFile::open` over the file agrees with
//! decoding the slots; and a header file that opens takes the next write (the next
//! generation, in the other slot) and reopens to it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::Arc;
use tilldb::FlushMethod;
use tilldb::internals::header::{
    Header, HeaderFile, SLOT_BYTES, SlotState, VERSION, VERSION_OFFSET, choose_slot,
};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb_fuzz::{Input, seal_header_slot};

const DIR: &str = "/db";

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let mut file = input.rest().to_vec();
    for index in 0..2 {
        // A sealed slot is written whole into the file, growing it if needed.
        if flags & (1 << index) != 0 && file.len() < (index + 1) * SLOT_BYTES {
            file.resize((index + 1) * SLOT_BYTES, 0);
        }
    }
    let mut slots = [[0u8; SLOT_BYTES]; 2];
    for (index, slot) in slots.iter_mut().enumerate() {
        let from = (index * SLOT_BYTES).min(file.len());
        let to = ((index + 1) * SLOT_BYTES).min(file.len());
        slot[..to - from].copy_from_slice(&file[from..to]);
        if flags & (1 << index) != 0 {
            seal_header_slot(slot, index);
            file[index * SLOT_BYTES..(index + 1) * SLOT_BYTES].copy_from_slice(slot);
        }
    }
    let states = [decode(&slots[0], 0), decode(&slots[1], 1)];
    let expected = match states {
        [Ok(a), Ok(b)] => choose_slot([a, b]).ok(),
        _ => None,
    };
    check_file(&file, expected);
});

/// Decodes one slot and checks the round trip.
fn decode(bytes: &[u8; SLOT_BYTES], slot: usize) -> Result<SlotState, (usize, &'static str)> {
    let state = Header::decode(bytes, slot);
    match &state {
        Ok(SlotState::Zero) => assert!(bytes.iter().all(|&b| b == 0)),
        Ok(SlotState::Valid(header)) => {
            // A slot of an older version this build reads (1) encodes as the current version;
            // every other byte is the same.
            let mut expected = *bytes;
            expected[VERSION_OFFSET..VERSION_OFFSET + 4].copy_from_slice(&VERSION.to_le_bytes());
            seal_header_slot(&mut expected, slot);
            assert_eq!(
                &header.encode(slot)[..],
                &expected[..],
                "encode(decode(x)) differs from x (its version made current)"
            );
            // The same bytes in the other slot never validate: the crc is seeded with the slot.
            assert_ne!(
                Header::decode(bytes, 1 - slot),
                Ok(SlotState::Valid(*header))
            );
        }
        Ok(SlotState::Torn) => assert!(bytes.iter().any(|&b| b != 0)),
        Err((offset, _)) => assert!(*offset < SLOT_BYTES),
    }
    state
}

/// `expected`: `Some(choice)` when both slots decode and `choose_slot` answers.
fn check_file(bytes: &[u8], expected: Option<Option<(usize, Header)>>) {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let storage: &dyn Storage = &*disk;
    let dir = Path::new(DIR);
    storage.create_dir_all(dir).expect("directory");
    let path = dir.join(tilldb::internals::header::HEADER_FILE_NAME);
    let file = storage
        .create(&path, FlushMethod::Fdatasync)
        .expect("create");
    file.set_len(bytes.len() as u64).expect("length");
    if !bytes.is_empty() {
        file.write_at(bytes, 0).expect("write");
    }
    drop(file);
    disk.crash(CrashMode::ProcessKill);
    let opened = HeaderFile::open(storage, dir, FlushMethod::Fdatasync);
    match (&opened, expected) {
        (Ok(None), Some(None)) | (Err(_), None) => {}
        (Ok(Some((_, header))), Some(Some((_, chosen)))) => assert_eq!(*header, chosen),
        _ => panic!("HeaderFile::open disagrees with the slots: {opened:?} vs {expected:?}"),
    }
    let Ok(Some((mut header_file, header))) = opened else {
        return;
    };
    header_file.check_invariants();
    let Ok(written) = header_file.write(&header) else {
        return;
    };
    assert_eq!(written.generation, header.generation + 1);
    drop(header_file);
    let (_, reread) = HeaderFile::open(storage, dir, FlushMethod::Fdatasync)
        .expect("a header file just written opens")
        .expect("and holds a header");
    assert_eq!(
        reread, written,
        "the header written is not the one read back"
    );
}
