//! Device facts on Windows: the sector sizes a file reports (`FileStorageInfo`), the file
//! system's name (`GetVolumeInformationByHandleW`), and what the volume's device says of its
//! write cache, FUA and seek penalty (`IOCTL_STORAGE_QUERY_PROPERTY` on `\\.\X:`, which needs
//! no administrator rights when opened without access). What cannot be read stays `None`,
//! and `notes` says why.

use crate::error::{Error, IoOp, Result};
use crate::io::{DeviceFacts, WriteCache};
use std::fs::OpenOptions;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::Path;
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_BACKUP_SEMANTICS, FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_STORAGE_INFO,
    FileStorageInfo, GetFileInformationByHandleEx, GetVolumeInformationByHandleW,
    GetVolumePathNameW, OPEN_EXISTING,
};
use windows_sys::Win32::System::IO::DeviceIoControl;
use windows_sys::Win32::System::Ioctl::{
    DEVICE_SEEK_PENALTY_DESCRIPTOR, IOCTL_STORAGE_QUERY_PROPERTY, PropertyStandardQuery,
    STORAGE_PROPERTY_ID, STORAGE_PROPERTY_QUERY, STORAGE_WRITE_CACHE_PROPERTY,
    StorageDeviceSeekPenaltyProperty, StorageDeviceWriteCacheProperty, WriteCacheEnabled,
};
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};

fn wide(path: &Path) -> Vec<u16> {
    path.as_os_str().encode_wide().chain(Some(0)).collect()
}

impl DeviceFacts {
    /// Facts for the file system holding directory `dir` (nothing is written there).
    pub fn for_dir(dir: &Path) -> Result<DeviceFacts> {
        Self::for_file(dir)
    }

    /// The same as [`DeviceFacts::for_dir`]: Windows reads nothing by writing.
    pub fn for_dir_read_only(dir: &Path) -> Result<DeviceFacts> {
        Self::for_file(dir)
    }

    /// Facts for an existing file or directory.
    pub fn for_file(path: &Path) -> Result<DeviceFacts> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
            .open(path)
            .map_err(|source| Error::Io {
                op: IoOp::Open,
                path: path.to_path_buf(),
                source,
            })?;
        let handle = file.as_raw_handle();
        let mut facts = DeviceFacts {
            path: path.to_path_buf(),
            // NO_BUFFERING is always offered; its alignment is the sector size below.
            direct_io: Some(true),
            // Windows has no atomic multi-sector writes for applications.
            atomic_write_unit_min_bytes: Some(0),
            atomic_write_unit_max_bytes: Some(0),
            ..DeviceFacts::default()
        };
        // SAFETY: plain data; zero is a valid bit pattern.
        let mut info: FILE_STORAGE_INFO = unsafe { std::mem::zeroed() };
        // SAFETY: the handle is open, the buffer is the struct's size.
        let ok = unsafe {
            GetFileInformationByHandleEx(
                handle,
                FileStorageInfo,
                std::ptr::from_mut(&mut info).cast(),
                u32::try_from(std::mem::size_of::<FILE_STORAGE_INFO>()).expect("small"),
            )
        };
        if ok == 0 {
            facts.notes.push(format!(
                "sector sizes unknown: FileStorageInfo failed ({})",
                std::io::Error::last_os_error()
            ));
        } else {
            facts.logical_block_bytes = Some(info.LogicalBytesPerSector).filter(|&n| n > 0);
            facts.physical_block_bytes =
                Some(info.PhysicalBytesPerSectorForPerformance).filter(|&n| n > 0);
            facts.dio_mem_align = facts.logical_block_bytes;
            facts.dio_offset_align = facts.logical_block_bytes;
        }
        let mut name = [0u16; 64];
        // SAFETY: the handle is open; the name buffer's length is passed.
        let ok = unsafe {
            GetVolumeInformationByHandleW(
                handle,
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                name.as_mut_ptr(),
                u32::try_from(name.len()).expect("small"),
            )
        };
        if ok == 0 {
            facts.notes.push(format!(
                "file system unknown: GetVolumeInformationByHandleW failed ({})",
                std::io::Error::last_os_error()
            ));
        } else {
            let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            facts.fs_type = Some(String::from_utf16_lossy(&name[..end]).to_lowercase());
        }
        read_device(path, &mut facts);
        if let Some(version) = wine_version() {
            facts.notes.push(format!(
                "{WINE_NOTE} {version}: files, flushes and write-through are Wine's emulation on \
                 Linux (it ignores FILE_FLAG_WRITE_THROUGH), so these are not Windows numbers"
            ));
        }
        Ok(facts)
    }
}

/// What the device under `path`'s volume says of its cache and seek penalty.
fn read_device(path: &Path, facts: &mut DeviceFacts) {
    let mut volume = [0u16; 261];
    let wpath = wide(path);
    // SAFETY: NUL-terminated input; the output buffer's length is passed.
    let ok = unsafe {
        GetVolumePathNameW(
            wpath.as_ptr(),
            volume.as_mut_ptr(),
            u32::try_from(volume.len()).expect("small"),
        )
    };
    let end = volume.iter().position(|&c| c == 0).unwrap_or(0);
    let root = String::from_utf16_lossy(&volume[..end]);
    // A verbatim path's volume comes back as `\\?\X:\`.
    let root = root.strip_prefix(r"\\?\").unwrap_or(&root).to_owned();
    // `C:\` -> `\\.\C:`: the volume device, opened with no access (no rights needed).
    let Some(letter) = root
        .strip_suffix('\\')
        .filter(|r| ok != 0 && r.ends_with(':'))
    else {
        facts.notes.push(format!(
            "device unknown: no drive letter for {} (volume {root:?})",
            path.display()
        ));
        return;
    };
    facts.device = Some(letter.to_owned());
    let device: Vec<u16> = format!(r"\\.\{letter}")
        .encode_utf16()
        .chain(Some(0))
        .collect();
    // SAFETY: NUL-terminated name; no security attributes or template.
    let handle = unsafe {
        CreateFileW(
            device.as_ptr(),
            0,
            FILE_SHARE_READ | FILE_SHARE_WRITE,
            std::ptr::null(),
            OPEN_EXISTING,
            0,
            std::ptr::null_mut(),
        )
    };
    if handle == INVALID_HANDLE_VALUE {
        facts.notes.push(format!(
            "write cache, FUA and seek penalty unknown: cannot open {letter} ({})",
            std::io::Error::last_os_error()
        ));
        return;
    }
    match query(handle, StorageDeviceWriteCacheProperty) {
        Some(out) if out.len() >= std::mem::size_of::<STORAGE_WRITE_CACHE_PROPERTY>() => {
            // SAFETY: the buffer holds at least one struct; read unaligned.
            let p: STORAGE_WRITE_CACHE_PROPERTY =
                unsafe { std::ptr::read_unaligned(out.as_ptr().cast()) };
            facts.write_cache = Some(if p.WriteCacheEnabled == WriteCacheEnabled {
                WriteCache::WriteBack
            } else {
                WriteCache::WriteThrough
            });
            // WriteThroughSupported: 2 supported (FUA), 1 not, 0 unknown.
            facts.fua = match p.WriteThroughSupported {
                2 => Some(true),
                1 => Some(false),
                _ => None,
            };
        }
        _ => facts.notes.push(format!(
            "write cache and FUA unknown: StorageDeviceWriteCacheProperty failed ({})",
            std::io::Error::last_os_error()
        )),
    }
    match query(handle, StorageDeviceSeekPenaltyProperty) {
        Some(out) if out.len() >= std::mem::size_of::<DEVICE_SEEK_PENALTY_DESCRIPTOR>() => {
            // SAFETY: as above.
            let p: DEVICE_SEEK_PENALTY_DESCRIPTOR =
                unsafe { std::ptr::read_unaligned(out.as_ptr().cast()) };
            facts.rotational = Some(p.IncursSeekPenalty);
        }
        _ => facts.notes.push(format!(
            "seek penalty unknown: StorageDeviceSeekPenaltyProperty failed ({})",
            std::io::Error::last_os_error()
        )),
    }
    // SAFETY: the handle was opened above and is closed once.
    unsafe { CloseHandle(handle) };
}

/// How a note about Wine begins (tools look for it).
pub const WINE_NOTE: &str = "running under Wine";

/// Wine's version when this process runs under Wine (its ntdll exports `wine_get_version`).
fn wine_version() -> Option<String> {
    let ntdll: Vec<u16> = "ntdll.dll".encode_utf16().chain(Some(0)).collect();
    // SAFETY: a NUL-terminated module name; ntdll is loaded in every process.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    if module.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated export name on a loaded module.
    let export = unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }?;
    // SAFETY: Wine documents `const char *wine_get_version(void)`.
    let get: unsafe extern "C" fn() -> *const std::ffi::c_char =
        unsafe { std::mem::transmute(export) };
    // SAFETY: a static NUL-terminated string owned by Wine.
    let version = unsafe { std::ffi::CStr::from_ptr(get()) };
    Some(version.to_string_lossy().into_owned())
}

/// One `IOCTL_STORAGE_QUERY_PROPERTY` standard query: the descriptor's bytes, or `None`.
fn query(handle: HANDLE, property: STORAGE_PROPERTY_ID) -> Option<Vec<u8>> {
    let q = STORAGE_PROPERTY_QUERY {
        PropertyId: property,
        QueryType: PropertyStandardQuery,
        AdditionalParameters: [0],
    };
    let mut out = vec![0u8; 512];
    let mut got = 0u32;
    // SAFETY: in and out buffers with their sizes; the handle is open.
    let ok = unsafe {
        DeviceIoControl(
            handle,
            IOCTL_STORAGE_QUERY_PROPERTY,
            std::ptr::from_ref(&q).cast(),
            u32::try_from(std::mem::size_of::<STORAGE_PROPERTY_QUERY>()).expect("small"),
            out.as_mut_ptr().cast(),
            u32::try_from(out.len()).expect("small"),
            &raw mut got,
            std::ptr::null_mut(),
        )
    };
    (ok != 0).then(|| {
        out.truncate(got as usize);
        out
    })
}

/// Windows offers applications no atomic multi-sector writes: always `Ok(false)`.
pub fn atomic_write_supported(_dir: &Path, _bytes: u32) -> Result<bool> {
    Ok(false)
}
