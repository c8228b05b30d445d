//! Writing a mirror directory for carrying into an air-gapped network.
//!
//! Owns the packed layout on the writing side (`HOST/NS/TYPE/terraform-provider-TYPE_VERSION_
//! OS_ARCH.zip`, placed by write-then-rename so a reader never sees half a zip), zipping an
//! unpacked package reproducibly (sorted entries, fixed timestamps), and the network mirror
//! JSON next to the zips, regenerated from what the directory holds, byte for byte as
//! `tofu providers mirror` writes it (two-space indent, sorted keys, one `h1:` per archive).
//! The result serves both as a filesystem mirror and, copied to a static web server, as a
//! network mirror. Does not fetch or verify packages: the caller hands over verified ones.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::address::{Platform, ProviderAddr, Version};
use super::error::InstallError;
use super::fsmirror;
use super::hash;
use super::lockfile::write_atomic;
use super::package::{self, Location};

/// `DIR/HOST/NS/TYPE`.
fn provider_dir(dir: &Path, addr: &ProviderAddr) -> PathBuf {
    dir.join(addr.rel_path())
}

/// The packed file name of a package.
pub(crate) fn packed_name(addr: &ProviderAddr, version: &Version, platform: &Platform) -> String {
    format!("terraform-provider-{}_{version}_{platform}.zip", addr.type_)
}

/// Places a package into the mirror at `dir` as a packed zip and returns its path: a zip is
/// copied, an unpacked directory is zipped.
pub(crate) fn place(
    dir: &Path,
    addr: &ProviderAddr,
    version: &Version,
    platform: &Platform,
    location: &Location,
) -> Result<PathBuf, InstallError> {
    let pdir = provider_dir(dir, addr);
    fs::create_dir_all(&pdir).map_err(|e| InstallError::io(&pdir, "create", e))?;
    let target = pdir.join(packed_name(addr, version, platform));
    let staging = pdir.join(format!(
        ".{}",
        package::unique_name(&packed_name(addr, version, platform))
    ));
    let guard = package::TempPath(staging.clone());
    match location {
        Location::Zip(src) => {
            let mut from = File::open(src).map_err(|e| InstallError::io(src, "read", e))?;
            let mut to =
                File::create(&staging).map_err(|e| InstallError::io(&staging, "create", e))?;
            io::copy(&mut from, &mut to).map_err(|e| InstallError::io(&staging, "write", e))?;
            to.sync_all()
                .map_err(|e| InstallError::io(&staging, "write", e))?;
        }
        Location::Dir(src) => {
            zip_dir(src, &staging).map_err(|e| InstallError::io(src, "zip", e))?
        }
    }
    fs::rename(&staging, &target).map_err(|e| InstallError::io(&target, "rename into", e))?;
    drop(guard);
    Ok(target)
}

/// Zips the package directory `src` into `dest` reproducibly: entries sorted, no directory
/// entries, timestamps fixed at 1980-01-01, unix permissions kept, deflate compression.
pub(crate) fn zip_dir(src: &Path, dest: &Path) -> io::Result<()> {
    let mut files = Vec::new();
    collect(src, "", &mut files)?;
    files.sort();
    let out = File::create(dest)?;
    let mut zip = zip::ZipWriter::new(io::BufWriter::new(out));
    for rel in files {
        let path = src.join(&rel);
        let mode = file_mode(&path)?;
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(mode);
        zip.start_file(rel.as_str(), opts)
            .map_err(io::Error::other)?;
        let mut f = File::open(&path)?;
        io::copy(&mut f, &mut zip)?;
    }
    let mut w = zip.finish().map_err(io::Error::other)?;
    w.flush()?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()
}

fn collect(dir: &Path, prefix: &str, out: &mut Vec<String>) -> io::Result<()> {
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().into_string().map_err(|n| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("non-UTF-8 file name {n:?}"),
            )
        })?;
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if fs::metadata(e.path())?.is_dir() {
            collect(&e.path(), &rel, out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
}

#[cfg(unix)]
fn file_mode(p: &Path) -> io::Result<u32> {
    use std::os::unix::fs::PermissionsExt;
    Ok(fs::metadata(p)?.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn file_mode(_: &Path) -> io::Result<u32> {
    Ok(0o755)
}

/// Regenerates `index.json` and every `VERSION.json` of `addr` in the mirror at `dir` from the
/// packed zips present there.
pub(crate) fn write_indexes(dir: &Path, addr: &ProviderAddr) -> Result<(), InstallError> {
    let pdir = provider_dir(dir, addr);
    // Keys sorted as strings, as Go's encoding/json sorts map keys.
    let mut by_version: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for found in fsmirror::FsMirror::new(dir).scan(addr) {
        let Location::Zip(path) = &found.location else {
            continue;
        };
        if path.parent() != Some(pdir.as_path()) {
            continue;
        }
        let h1 = hash::h1_of_zip_package(path).map_err(|e| InstallError::io(path, "hash", e))?;
        let file = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        by_version
            .entry(found.version.to_string())
            .or_default()
            .insert(
                found.platform.to_string(),
                json!({ "hashes": [h1.as_str()], "url": file }),
            );
    }
    let mut versions = serde_json::Map::new();
    for (version, archives) in &by_version {
        versions.insert(version.clone(), json!({}));
        let mut arch = serde_json::Map::new();
        for (platform, entry) in archives {
            arch.insert(platform.clone(), entry.clone());
        }
        let doc = json!({ "archives": Value::Object(arch) });
        write_json(&pdir.join(format!("{version}.json")), &doc)?;
    }
    write_json(
        &pdir.join("index.json"),
        &json!({ "versions": Value::Object(versions) }),
    )
}

fn write_json(path: &Path, doc: &Value) -> Result<(), InstallError> {
    let text = serde_json::to_string_pretty(doc).expect("JSON values serialise");
    write_atomic(path, text.as_bytes())
}
