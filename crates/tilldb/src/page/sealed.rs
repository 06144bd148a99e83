//! # Sealed pages (data file version 2: an encrypted database's)
//!
//! A sealed page keeps the plain page's header (`page/mod.rs`) in the clear and seals its
//! body: encrypted and authenticated under the epoch key of the writer that wrote it
//! (`crypt/page.rs`, docs/encryption.md section 3). Its last 40 bytes are the trailer.
//! Little-endian.
//!
//! ```text
//! offset              size field
//!      0                 4 crc32c    over the page id, then bytes 4..page_bytes as on disk
//!                                    (ciphertext and trailer): a torn page is still BadCrc
//!      4                20 header    kind, version 2, zero, page_id, page_lsn, as version 1
//!     24    page_bytes-64 body       ciphertext of the plain body
//!     page_bytes-40     16 salt      of the epoch that sealed the page: names its key
//!     page_bytes-24      8 counter   the nonce's counter in that epoch (nonce: counter, 0u32)
//!     page_bytes-16     16 tag       over the body and the header bytes 4..24 (the AAD)
//! ```
//!
//! The AAD binds the page's id, lsn, kind and version, so a page moved to another id, or
//! given another lsn, with its crc made again, fails its tag: [`PageFault::BadTag`]. Every
//! write seals again with the next counter: no two writes of a page share a nonce, even of
//! the same bytes at the same lsn. In memory a page is plain; the trailer's bytes there are
//! left over from the last read and mean nothing.

use super::{
    CRC_OFFSET, HEADER_BYTES, KIND_OFFSET, PageBuf, PageFault, PageId, PageState, VERSION_SEALED,
};
use crate::checksum::crc32c_seeded;
use crate::crypt::{PAGE_SALT_BYTES, PageKeys, PageSeal, TAG_BYTES};
use crate::io::AlignedBuf;

/// Bytes of a sealed page's trailer: salt, counter, tag.
pub const TRAILER_BYTES: usize = PAGE_SALT_BYTES + size_of::<u64>() + TAG_BYTES;
const _: () = assert!(TRAILER_BYTES == 40);

/// Where the trailer's fields lie in a page of `page_bytes`: salt, counter, tag.
fn trailer(page_bytes: usize) -> (usize, usize, usize) {
    let salt = page_bytes - TRAILER_BYTES;
    let counter = salt + PAGE_SALT_BYTES;
    (salt, counter, counter + size_of::<u64>())
}

impl PageBuf {
    /// Seals this sealed-format page into `out` (its size): the header, the body encrypted
    /// under the next nonce of `keys`' epoch, the trailer, and the crc over them. The page
    /// itself stays plain.
    pub fn seal_into(&self, keys: &PageKeys, out: &mut [u8]) {
        assert!(self.is_sealed(), "{} is not a sealed page", self.id);
        let page_bytes = self.buf.len();
        assert_eq!(
            out.len(),
            page_bytes,
            "sealed into a buffer of another size"
        );
        let (salt_at, counter_at, tag_at) = trailer(page_bytes);
        out[..salt_at].copy_from_slice(&self.buf[..salt_at]);
        let (head, rest) = out.split_at_mut(HEADER_BYTES);
        let seal = keys.seal(
            &head[KIND_OFFSET..],
            &mut rest[..salt_at - HEADER_BYTES],
            self.lsn(),
        );
        out[salt_at..counter_at].copy_from_slice(&seal.salt);
        out[counter_at..tag_at].copy_from_slice(&seal.counter.to_le_bytes());
        out[tag_at..].copy_from_slice(&seal.tag);
        let crc = crc32c_seeded(self.id.0, &[&out[KIND_OFFSET..]]);
        out[CRC_OFFSET..KIND_OFFSET].copy_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(
            PageBuf::validate(self.id, out),
            Ok(PageState::Valid(self.kind()))
        );
    }

    /// Wraps bytes read from the place of page `id` in a data file of sealed pages: checks
    /// them (as [`PageBuf::from_bytes`]), then opens the body with `keys`. `Ok(None)` for an
    /// unwritten (all-zero) page.
    pub fn open_sealed(
        id: PageId,
        mut buf: AlignedBuf,
        keys: &PageKeys,
    ) -> Result<Option<PageBuf>, PageFault> {
        if let PageState::Unwritten = PageBuf::validate(id, &buf)? {
            return Ok(None);
        }
        if buf[super::VERSION_OFFSET] != VERSION_SEALED {
            return Err(PageFault::WrongFormat);
        }
        let (salt_at, counter_at, tag_at) = trailer(buf.len());
        let seal = PageSeal {
            salt: buf[salt_at..counter_at].try_into().expect("16 bytes"),
            counter: u64::from_le_bytes(buf[counter_at..tag_at].try_into().expect("8 bytes")),
            tag: buf[tag_at..].try_into().expect("16 bytes"),
        };
        let (head, rest) = buf.split_at_mut(HEADER_BYTES);
        keys.open(
            &seal,
            &head[KIND_OFFSET..],
            &mut rest[..salt_at - HEADER_BYTES],
        )
        .map_err(|_| PageFault::BadTag)?;
        Ok(Some(PageBuf::from_bytes_unchecked(id, buf)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypt::{Cipher, DataKey, DatabaseKeys, KEY_BYTES};
    use crate::page::{PageFormat, PageKind};
    use std::collections::HashSet;
    use std::sync::Arc;
    use zeroize::Zeroizing;

    fn keys(db_id: u8) -> Arc<DatabaseKeys> {
        Arc::new(DatabaseKeys::new(
            Cipher::Aes256Gcm,
            [db_id; 16],
            DataKey::from_bytes(Zeroizing::new([4; KEY_BYTES])),
        ))
    }

    fn epoch(keys: &Arc<DatabaseKeys>, salt: u8) -> PageKeys {
        PageKeys::new_epoch(Arc::clone(keys), |b| {
            b.fill(salt);
            Ok(())
        })
        .expect("salt")
    }

    const MARKER: &[u8] = b"receipt-4711:espresso";

    fn leaf(id: u64, page_bytes: u32) -> PageBuf {
        let format = PageFormat::new(page_bytes, true);
        let mut page = PageBuf::formatted(PageId(id), PageKind::Leaf, format);
        page.set_lsn(4242);
        assert_eq!(page.body().len(), format.body_bytes());
        let body = page.body_mut();
        let end = body.len();
        body[..MARKER.len()].copy_from_slice(MARKER);
        body[end - MARKER.len()..].copy_from_slice(MARKER);
        page
    }

    fn sealed(page: &PageBuf, keys: &PageKeys) -> AlignedBuf {
        let mut out = AlignedBuf::zeroed(page.page_bytes());
        page.seal_into(keys, &mut out);
        out
    }

    fn crc_made_again(id: u64, bytes: &mut [u8]) {
        let crc = crc32c_seeded(id, &[&bytes[KIND_OFFSET..]]);
        bytes[CRC_OFFSET..KIND_OFFSET].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn a_sealed_page_opens_to_its_plain_body_and_holds_none_of_it() {
        let k = keys(1);
        for page_bytes in [4096, 16384, 65536] {
            let page = leaf(9, page_bytes);
            let bytes = sealed(&page, &epoch(&k, 3));
            assert!(
                !bytes.windows(MARKER.len()).any(|w| w == MARKER),
                "{page_bytes}: plaintext on disk"
            );
            let back = PageBuf::open_sealed(PageId(9), bytes, &epoch(&k, 4))
                .expect("opens")
                .expect("written");
            assert_eq!(back.body(), page.body());
            assert_eq!((back.lsn(), back.kind()), (4242, PageKind::Leaf));
            assert!(back.is_sealed());
        }
    }

    #[test]
    fn every_flipped_bit_of_a_sealed_page_is_refused_even_with_its_crc_made_again() {
        let k = keys(1);
        let good = sealed(&leaf(5, 4096), &epoch(&k, 3));
        let reader = epoch(&k, 9);
        for bit in 32..4096 * 8 {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                PageBuf::open_sealed(PageId(5), bad.clone(), &reader).err(),
                Some(PageFault::BadCrc),
                "bit {bit}"
            );
            crc_made_again(5, &mut bad);
            let fault = PageBuf::open_sealed(PageId(5), bad, &reader).err();
            assert!(
                matches!(
                    fault,
                    Some(PageFault::BadTag | PageFault::WrongPageId | PageFault::BadHeader)
                ),
                "bit {bit}: {fault:?}"
            );
        }
    }

    #[test]
    fn a_sealed_page_moved_to_another_id_or_lsn_with_its_crc_made_again_fails_its_tag() {
        let k = keys(1);
        let good = sealed(&leaf(5, 4096), &epoch(&k, 3));
        let reader = epoch(&k, 9);
        let mut moved = good.clone();
        moved[super::super::PAGE_ID_OFFSET..super::super::PAGE_LSN_OFFSET]
            .copy_from_slice(&6u64.to_le_bytes());
        crc_made_again(6, &mut moved);
        assert_eq!(
            PageBuf::open_sealed(PageId(6), moved, &reader).err(),
            Some(PageFault::BadTag)
        );
        let mut older = good.clone();
        older[super::super::PAGE_LSN_OFFSET..HEADER_BYTES].copy_from_slice(&1u64.to_le_bytes());
        crc_made_again(5, &mut older);
        assert_eq!(
            PageBuf::open_sealed(PageId(5), older, &reader).err(),
            Some(PageFault::BadTag)
        );
        let other_database = epoch(&keys(2), 3);
        assert_eq!(
            PageBuf::open_sealed(PageId(5), good, &other_database).err(),
            Some(PageFault::BadTag)
        );
    }

    #[test]
    fn a_plain_page_in_a_sealed_data_file_is_refused() {
        let mut plain = PageBuf::new(PageId(5), PageKind::Leaf, 4096);
        let bytes = plain.seal().clone();
        assert_eq!(
            PageBuf::open_sealed(PageId(5), bytes, &epoch(&keys(1), 3)).err(),
            Some(PageFault::WrongFormat)
        );
        let zeros = AlignedBuf::zeroed(4096);
        assert!(matches!(
            PageBuf::open_sealed(PageId(5), zeros, &epoch(&keys(1), 3)),
            Ok(None)
        ));
    }

    /// The format pinned (STYLE section 2): a page sealed under a fixed data key, database
    /// id and epoch salt, at counter 0, gives these bytes. A change to the key derivation, the
    /// nonce, the associated data, the trailer or the crc changes them: a new page version.
    #[test]
    fn golden_sealed_page() {
        let keys = keys(1);
        let page = leaf(9, 4096);
        let bytes = sealed(&page, &epoch(&keys, 3));
        let hex = |b: &[u8]| {
            use std::fmt::Write;
            b.iter().fold(String::new(), |mut s, x| {
                write!(s, "{x:02x}").expect("writing to a String");
                s
            })
        };
        assert_eq!(
            hex(&bytes[4..24]),
            "0102000009000000000000009210000000000000"
        );
        assert_eq!(
            hex(&bytes[4096 - 40..4096 - 16]),
            format!("{}{}", "03".repeat(16), "0".repeat(16))
        );
        assert_eq!(hex(&bytes[..4]), GOLDEN_CRC);
        assert_eq!(hex(&bytes[24..40]), GOLDEN_BODY);
        assert_eq!(hex(&bytes[4096 - 16..]), GOLDEN_TAG);
    }

    const GOLDEN_CRC: &str = "0c918be7";
    const GOLDEN_BODY: &str = "08908d417ef05b1a7776b528a3632617";
    const GOLDEN_TAG: &str = "c3ef63a841eaaae0d873efef020ff5f6";

    /// docs/encryption.md section 3: one page, unchanged, sealed 10,000 times over three
    /// epochs (reopens) gets 10,000 nonces and 10,000 ciphertexts.
    #[test]
    fn one_page_sealed_ten_thousand_times_over_three_epochs_never_repeats_a_nonce() {
        let k = keys(1);
        let page = leaf(5, 4096);
        let (salt_at, counter_at, tag_at) = trailer(4096);
        let (mut nonces, mut bodies) = (HashSet::new(), HashSet::new());
        for (e, seals) in [(1u8, 3000), (2, 3000), (3, 4000)] {
            let writer = epoch(&k, e);
            for _ in 0..seals {
                let bytes = sealed(&page, &writer);
                let nonce = (
                    bytes[salt_at..counter_at].to_vec(),
                    bytes[counter_at..tag_at].to_vec(),
                );
                assert!(nonces.insert(nonce), "a nonce repeated");
                assert!(bodies.insert(bytes[HEADER_BYTES..salt_at].to_vec()));
            }
        }
        assert_eq!((nonces.len(), bodies.len()), (10_000, 10_000));
    }
}
