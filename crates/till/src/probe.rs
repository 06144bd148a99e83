//! `till probe [DIR]`: device facts, the measured cost of every flush method at several write
//! sizes on a preallocated and on a growing file, a recommendation and warnings.

use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;
use tilldb::FlushMethod;
use tilldb::io::{
    DeviceFacts, FileStorage, MeasureFile, MeasureSpec, Measurement, Recommendation, Storage,
    WriteCache, atomic_write_supported, measure, recommend,
};

#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// Directory on the file system to probe (created if missing). Scratch files are removed.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Total time for all measurements, in seconds, shared equally among them.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Write sizes to measure, in bytes.
    #[arg(long, value_delimiter = ',', default_value = "512,4096,16384")]
    write_bytes: Vec<u32>,
    /// Flush methods to measure (default: every one this platform has).
    #[arg(long, value_delimiter = ',')]
    methods: Vec<FlushMethod>,
    /// Files to measure on: preallocated, append, or both.
    #[arg(long, value_delimiter = ',', default_value = "preallocated,append")]
    files: Vec<String>,
    /// Page size to check atomic page writes for.
    #[arg(long, default_value_t = 16384)]
    page_bytes: u32,
    /// Print JSON (stable for scripts) instead of tables.
    #[arg(long)]
    json: bool,
}

/// The methods to measure: those asked for, or every one this platform has; one it lacks is
/// refused before anything is written.
fn methods(args: &ProbeArgs) -> Result<Vec<FlushMethod>, String> {
    let methods = if args.methods.is_empty() {
        FlushMethod::available()
    } else {
        args.methods.clone()
    };
    match methods.iter().find(|&&m| !tilldb::io::platform_supports(m)) {
        Some(lacking) => Err(format!(
            "flush method {lacking} is not available on {}; the ones that are: {}",
            std::env::consts::OS,
            FlushMethod::available()
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        None => Ok(methods),
    }
}

pub fn run(args: &ProbeArgs) -> Result<(), Box<dyn std::error::Error>> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        return Err("--seconds must be a positive number".into());
    }
    let files = args
        .files
        .iter()
        .map(|f| match f.as_str() {
            "preallocated" => Ok(MeasureFile::Preallocated),
            "append" => Ok(MeasureFile::Append),
            other => Err(format!(
                "unknown --files value {other:?}: expected preallocated or append"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let methods = methods(args)?;
    let storage = FileStorage::new();
    storage.create_dir_all(&args.dir)?;
    let dir = std::fs::canonicalize(&args.dir)?;
    let facts = storage.device_facts(&dir)?;
    let atomic_verified = match facts.atomic_write_covers(args.page_bytes) {
        Some(true) => Some(atomic_write_supported(&dir, args.page_bytes)?),
        _ => None,
    };

    let mut specs = Vec::new();
    for &method in &methods {
        for &write_bytes in &args.write_bytes {
            for &file in &files {
                specs.push(MeasureSpec {
                    method,
                    write_bytes,
                    file,
                    duration: Duration::ZERO,
                });
            }
        }
    }
    if specs.is_empty() {
        return Err("nothing to measure: give at least one method, write size and file".into());
    }
    let per_spec =
        Duration::from_secs_f64((args.seconds / f64::from(u32::try_from(specs.len())?)).max(0.05));
    let bar = ProgressBar::new(specs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("valid template"),
    );
    let mut results = Vec::with_capacity(specs.len());
    for spec in specs {
        bar.set_message(format!(
            "{} {} B {}",
            spec.method, spec.write_bytes, spec.file
        ));
        results.push(measure(
            &storage,
            &dir,
            &facts,
            MeasureSpec {
                duration: per_spec,
                ..spec
            },
        )?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut rec = recommend(&facts, &results, args.page_bytes);
    if atomic_verified == Some(false) {
        rec.atomic_page_writes = Some(false);
        rec.warnings
            .push("statx reports atomic writes, but a test RWF_ATOMIC write was refused".into());
    }
    if args.json {
        let out = json!({
            "device": device_json(&facts, atomic_verified),
            "seconds_per_measurement": per_spec.as_secs_f64(),
            "results": results.iter().map(measurement_json).collect::<Vec<_>>(),
            "recommendation": recommendation_json(&rec, &facts, args.page_bytes),
            "warnings": rec.warnings,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(
            &facts,
            atomic_verified,
            per_spec,
            &results,
            &rec,
            args.page_bytes,
        );
    }
    Ok(())
}

fn write_cache_name(w: WriteCache) -> &'static str {
    match w {
        WriteCache::WriteBack => "write back",
        WriteCache::WriteThrough => "write through",
    }
}

fn device_json(f: &DeviceFacts, atomic_verified: Option<bool>) -> Value {
    json!({
        "path": f.path,
        "fs_type": f.fs_type,
        "device": f.device,
        "dev": f.dev_major_minor.map(|(a, b)| format!("{a}:{b}")),
        "logical_block_bytes": f.logical_block_bytes,
        "physical_block_bytes": f.physical_block_bytes,
        "fs_block_bytes": f.fs_block_bytes,
        "direct_io": f.direct_io,
        "dio_mem_align": f.dio_mem_align,
        "dio_offset_align": f.dio_offset_align,
        "atomic_write_unit_min_bytes": f.atomic_write_unit_min_bytes,
        "atomic_write_unit_max_bytes": f.atomic_write_unit_max_bytes,
        "atomic_write_verified": atomic_verified,
        "device_atomic_write_max_bytes": f.device_atomic_write_max_bytes,
        "rotational": f.rotational,
        "write_cache": f.write_cache.map(write_cache_name),
        "fua": f.fua,
        "notes": f.notes,
    })
}

fn measurement_json(m: &Measurement) -> Value {
    json!({
        "method": m.spec.method.name(),
        "write_bytes": m.spec.write_bytes,
        "file": m.spec.file.name(),
        "skipped": m.skipped,
        "ops": m.ops,
        "seconds": m.elapsed.as_secs_f64(),
        "flushes_per_sec": round1(m.flushes_per_sec),
        "p50_us": round1(m.p50_us),
        "p99_us": round1(m.p99_us),
        "max_us": round1(m.max_us),
    })
}

fn recommendation_json(r: &Recommendation, facts: &DeviceFacts, page_bytes: u32) -> Value {
    json!({
        "flush_method": r.flush_method.map(FlushMethod::name),
        "log_block_bytes": r.log_block_bytes,
        "page_bytes": page_bytes,
        "atomic_page_writes": r.atomic_page_writes,
        "torn_page_guard_auto": auto_guard(facts, r.atomic_page_writes, page_bytes).name(),
        "reasons": r.reasons,
    })
}

/// What `TornPageGuard::Auto` chooses here: the rule of `tilldb::internals::page::choose_guard`
/// (hardware atomic writes covering the page, and a test write that worked).
fn auto_guard(
    facts: &DeviceFacts,
    atomic_page_writes: Option<bool>,
    page_bytes: u32,
) -> tilldb::TornPageGuard {
    let hardware = facts
        .device_atomic_write_max_bytes
        .is_some_and(|max| max >= page_bytes);
    if hardware && atomic_page_writes == Some(true) {
        tilldb::TornPageGuard::Atomic
    } else {
        tilldb::TornPageGuard::FullPageImages
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn show<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "unknown".to_owned(), |x| x.to_string())
}

fn print_text(
    f: &DeviceFacts,
    atomic_verified: Option<bool>,
    per_spec: Duration,
    results: &[Measurement],
    rec: &Recommendation,
    page_bytes: u32,
) {
    print_facts(f, atomic_verified);
    print_results(per_spec, results);
    print_recommendation(f, rec, page_bytes);
}

fn print_facts(f: &DeviceFacts, atomic_verified: Option<bool>) {
    println!("Device facts for {}", f.path.display());
    let atomic = match (f.atomic_write_unit_min_bytes, f.atomic_write_unit_max_bytes) {
        (Some(_), Some(0)) => "not supported".to_owned(),
        (Some(min), Some(max)) => format!(
            "{min}..{max} B{}",
            match atomic_verified {
                Some(true) => ", verified by a test write",
                Some(false) => ", but a test write was refused",
                None => "",
            }
        ),
        _ => "unknown".to_owned(),
    };
    let rows: [(&str, String); 11] = [
        ("file system", show(f.fs_type.as_ref())),
        (
            "device",
            format!(
                "{} ({})",
                show(f.device.as_ref()),
                show(f.dev_major_minor.map(|(a, b)| format!("{a}:{b}")))
            ),
        ),
        ("logical block", bytes(f.logical_block_bytes)),
        ("physical block", bytes(f.physical_block_bytes)),
        (
            "direct I/O",
            show(f.direct_io.map(|d| if d { "supported" } else { "refused" })),
        ),
        (
            "DIO alignment",
            format!(
                "memory {}, offset {}",
                bytes(f.dio_mem_align),
                bytes(f.dio_offset_align)
            ),
        ),
        ("atomic writes", atomic),
        (
            "device atomic max",
            match f.device_atomic_write_max_bytes {
                Some(0) => "none (hardware)".to_owned(),
                other => bytes(other),
            },
        ),
        ("rotational", show(f.rotational)),
        ("write cache", show(f.write_cache.map(write_cache_name))),
        ("FUA", show(f.fua)),
    ];
    for (name, value) in rows {
        println!("  {name:<18} {value}");
    }
    for note in &f.notes {
        println!("  {:<18} {note}", "note");
    }
}

fn print_results(per_spec: Duration, results: &[Measurement]) {
    println!(
        "\nFlushed writes ({:.2} s each; one write then one flush per operation)",
        per_spec.as_secs_f64()
    );
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header([
        "method",
        "bytes",
        "file",
        "flushes/s",
        "p50 us",
        "p99 us",
        "max us",
    ]);
    for m in results {
        let (method, size, file) = (
            shown_method(m.spec.method),
            m.spec.write_bytes.to_string(),
            m.spec.file.to_string(),
        );
        match &m.skipped {
            Some(why) => table.add_row([
                method,
                size,
                file,
                format!("skipped: {why}"),
                String::new(),
                String::new(),
                String::new(),
            ]),
            None => table.add_row([
                method,
                size,
                file,
                format!("{:.0}", m.flushes_per_sec),
                format!("{:.0}", m.p50_us),
                format!("{:.0}", m.p99_us),
                format!("{:.0}", m.max_us),
            ]),
        };
    }
    println!("{table}");
}

fn print_recommendation(facts: &DeviceFacts, rec: &Recommendation, page_bytes: u32) {
    println!("\nRecommendation");
    println!(
        "  flush method       {}",
        rec.flush_method
            .map_or_else(|| "unknown".to_owned(), shown_method)
    );
    println!("  log block          {} B", rec.log_block_bytes);
    let atomic = show(rec.atomic_page_writes.map(|a| if a { "yes" } else { "no" }));
    println!("  {:<18} {atomic}", format!("atomic {page_bytes} B"));
    let guard = auto_guard(facts, rec.atomic_page_writes, page_bytes);
    println!(
        "  torn-page guard    {} (what the default, auto, chooses here)",
        guard.name()
    );
    for reason in &rec.reasons {
        println!("  - {reason}");
    }
    if !rec.warnings.is_empty() {
        println!("\nWarnings");
        for w in &rec.warnings {
            println!("  ! {w}");
        }
    }
}

fn bytes(v: Option<u32>) -> String {
    v.map_or_else(|| "unknown".to_owned(), |n| format!("{n} B"))
}

/// A method as this platform knows it: "dsync (write-through)" on Windows, "fsync" on Linux.
fn shown_method(method: tilldb::FlushMethod) -> String {
    match tilldb::io::native_method_name(method) {
        Some(native) => format!("{method} ({native})"),
        None => method.to_string(),
    }
}
