//! Hostile provider packages: a zip whose entries all point at the same gigabyte of data, and
//! one whose entries unpack to more than they declare. Each is refused by a cheap check before
//! anything is unpacked, and nothing reaches the cache. (How fast: bench/hostile-zip.sh.)

use std::path::Path;

use super::*;

/// A zip of 64 entries sharing one local entry of 1 GiB of zeros (about 1 MiB compressed):
/// 64 GiB declared, as the overlapping-entry bomb does.
fn overlapping_bomb() -> &'static [u8] {
    static BOMB: OnceLock<Vec<u8>> = OnceLock::new();
    BOMB.get_or_init(|| {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(1))
            .unix_permissions(0o755);
        w.start_file(BINARY_NAME, opts).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..1024 {
            w.write_all(&zeros).unwrap();
        }
        let single = w.finish().unwrap().into_inner();
        repeat_central_entry(&single, 64)
    })
}

fn u16_at(b: &[u8], i: usize) -> usize {
    u16::from_le_bytes([b[i], b[i + 1]]) as usize
}

fn u32_at(b: &[u8], i: usize) -> usize {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize
}

/// Rewrites a one-entry zip so its central directory lists that entry `n` times under
/// different names, all pointing at the same local header.
fn repeat_central_entry(zip: &[u8], n: usize) -> Vec<u8> {
    let eocd = zip.len() - 22;
    assert_eq!(u32_at(zip, eocd), 0x0605_4b50, "no zip64, no comment");
    let cd_start = u32_at(zip, eocd + 16);
    let record = &zip[cd_start..eocd];
    let name_len = u16_at(record, 28);
    let fixed = &record[..46];
    let tail = &record[46 + name_len..];
    let mut out = zip[..cd_start].to_vec();
    for i in 0..n {
        let name = if i == 0 {
            BINARY_NAME.to_string()
        } else {
            format!("copy-{i}")
        };
        let mut header = fixed.to_vec();
        header[28..30].copy_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(tail);
    }
    let cd_size = out.len() - cd_start;
    let mut end = zip[eocd..].to_vec();
    end[8..10].copy_from_slice(&(n as u16).to_le_bytes());
    end[10..12].copy_from_slice(&(n as u16).to_le_bytes());
    end[12..16].copy_from_slice(&(cd_size as u32).to_le_bytes());
    out.extend_from_slice(&end);
    out
}

/// A packed filesystem mirror holding `zip` as the current platform's package of `addr`.
fn mirror_with(dir: &Path, addr: &str, zip: &[u8]) -> InstallOptions {
    let mirror = dir.join("mirror");
    let pdir = mirror.join(addr);
    std::fs::create_dir_all(&pdir).unwrap();
    std::fs::write(pdir.join(zip_name(&Platform::current())), zip).unwrap();
    let mut o = opts(dir);
    o.offline = true;
    o.fs_mirrors = vec![mirror];
    o
}

#[test]
fn registry_an_overlapping_entry_zip_bomb_is_refused_before_unpacking() {
    let addr = "registry.opentofu.org/nivis/null";
    let bomb = overlapping_bomb();

    // A lock file whose hashes the bomb does not match.
    let d = tempfile::tempdir().unwrap();
    let o = mirror_with(d.path(), addr, bomb);
    let locked = lock_text(
        "tofu init",
        addr,
        None,
        &[fixture().h1.clone(), format!("zh:{}", fixture().zip_sha)],
    );
    std::fs::write(&o.lock_file, &locked).unwrap();
    let err = registry::install(addr, None, &o).unwrap_err().to_string();
    // Its zh: matches nothing, but the lock's h1: could still match a repacked zip: the shape
    // checks refuse it before any entry is decompressed.
    assert!(err.contains("overlap"), "refused by a cheap check: {err}");
    std::fs::remove_file(&o.lock_file).unwrap();
    assert_nothing_installed(&o, "bomb against a lock file");

    // No lock file: the mirror is trusted, so the shape checks are what refuse it.
    let d = tempfile::tempdir().unwrap();
    let o = mirror_with(d.path(), addr, bomb);
    let err = registry::install(addr, None, &o).unwrap_err().to_string();
    assert!(err.contains("overlap"), "{err}");
    assert!(err.contains("Nothing was installed"), "{err}");
    assert_nothing_installed(&o, "bomb without a lock file");
}

#[test]
fn registry_entries_that_unpack_beyond_their_declared_size_are_refused() {
    let addr = "registry.opentofu.org/nivis/null";
    // One entry of 4 MiB of zeros whose headers claim 1 KiB.
    let mut zip = make_zip(&[(BINARY_NAME, &vec![0u8; 4 << 20], 0o755)]);
    let eocd = zip.len() - 22;
    let cd_start = u32_at(&zip, eocd + 16);
    zip[cd_start + 24..cd_start + 28].copy_from_slice(&1024u32.to_le_bytes());
    zip[22..26].copy_from_slice(&1024u32.to_le_bytes());
    let d = tempfile::tempdir().unwrap();
    let o = mirror_with(d.path(), addr, &zip);
    let err = registry::install(addr, None, &o).unwrap_err().to_string();
    assert!(err.contains("declare"), "{err}");
    assert_nothing_installed(&o, "lying sizes");

    // Too many entries is refused from the directory alone.
    let names: Vec<String> = (0..5000).map(|i| format!("f{i}")).collect();
    let mut entries: Vec<(&str, &[u8], u32)> = names
        .iter()
        .map(|n| (n.as_str(), &b""[..], 0o644))
        .collect();
    entries.push((BINARY_NAME, b"#!/bin/sh\n", 0o755));
    let zip = make_zip(&entries);
    let d = tempfile::tempdir().unwrap();
    let o = mirror_with(d.path(), addr, &zip);
    let err = registry::install(addr, None, &o).unwrap_err().to_string();
    assert!(err.contains("entries"), "{err}");
    assert_nothing_installed(&o, "too many entries");
}
