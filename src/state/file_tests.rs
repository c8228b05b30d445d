//! Tests of the file store: persistence, compaction, permissions, locking, failed writes.

use super::*;
use crate::state::conformance;
use crate::state::testutil::{file_len, holder, journal_path, open, put, res, temp_state, GRANT};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::time::Instant;

#[test]
fn file_store_conforms_and_persists() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    conformance(&mut store, GRANT);
    let expected = store.state().clone();
    drop(store);
    assert_eq!(open(&path).state().resources, expected.resources);
}

#[test]
fn put_and_remove_replay_across_reopen() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    store.commit(&[put("a", 1), put("b", 2)], GRANT).unwrap();
    store.commit(&[put("c", 3)], GRANT).unwrap();
    store
        .commit(&[Change::Remove("a".into()), put("b", 20)], GRANT)
        .unwrap();
    let expected = store.state().clone();
    assert!(!path.exists(), "no snapshot before the first compaction");
    drop(store);
    assert!(file_len(&journal_path(&path)) > 0, "drop does not compact");

    let read = Store::read_only(&path).unwrap();
    assert_eq!(read, expected, "read_only replays the journal in memory");
    let store = open(&path);
    assert_eq!(store.state().resources, expected.resources);
    assert_eq!(store.state().lineage, expected.lineage);
    assert_eq!(store.state().ids().collect::<Vec<_>>(), ["b", "c"]);
    assert_eq!(store.state().get("b"), Some(&res("b", 20)));
}

#[test]
fn serial_and_lineage_survive_reopen() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    let lineage = store.state().lineage.clone();
    assert_eq!(store.state().serial, 0);
    store.commit(&[put("a", 1)], GRANT).unwrap();
    store.close().unwrap();

    let mut store = open(&path);
    assert_eq!(
        (store.state().serial, &store.state().lineage),
        (1, &lineage)
    );
    store.commit(&[put("b", 2)], GRANT).unwrap();
    drop(store);

    // The journal was not empty, so opening compacts: serial 2.
    let store = open(&path);
    assert_eq!(
        (store.state().serial, &store.state().lineage),
        (2, &lineage)
    );
    assert_eq!(store.state().len(), 2);
    store.close().unwrap();
    let store = open(&path);
    assert_eq!(
        store.state().serial,
        2,
        "closing with an empty journal writes nothing"
    );
    drop(store);
    assert_eq!(Store::read_only(&path).unwrap().lineage, lineage);
}

#[test]
fn compaction_empties_the_journal_and_keeps_content() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    for i in 0..50 {
        store.commit(&[put(&format!("r{i}"), i)], GRANT).unwrap();
    }
    store.commit(&[Change::Remove("r7".into())], GRANT).unwrap();
    let journal = journal_path(&path);
    assert!(file_len(&journal) > 0);
    let before = store.state().clone();
    store.compact().unwrap();
    assert_eq!(file_len(&journal), 0);
    assert_eq!(store.state().serial, before.serial + 1);
    assert_eq!(store.state().resources, before.resources);
    assert!(!StatePaths::new(&path).tmp.exists());
    drop(store);
    let on_disk: StateFile = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(on_disk.resources, before.resources);
    assert_eq!(open(&path).state().resources, before.resources);
}

#[test]
fn journal_threshold_triggers_compaction() {
    let (_dir, path) = temp_state();
    let journal = journal_path(&path);
    let mut store = open(&path);
    store.commit(&[put("small", 1)], GRANT).unwrap();
    assert!(file_len(&journal) > 0 && !path.exists());

    let mut big = res("big", 2);
    big.attributes["blob"] = json!("x".repeat(COMPACT_MIN_JOURNAL_BYTES as usize));
    store.commit(&[Change::Put(big.clone())], GRANT).unwrap();
    assert!(store.compaction_error().is_none());
    assert_eq!(file_len(&journal), 0, "crossing the threshold compacts");
    assert_eq!(store.state().serial, 1);
    let snapshot_len = file_len(&path);
    assert!(snapshot_len > COMPACT_MIN_JOURNAL_BYTES);
    assert_eq!(
        store.compact_at, snapshot_len,
        "a big snapshot raises the threshold"
    );

    // A journal smaller than the snapshot does not compact again.
    let mut half = res("half", 3);
    half.attributes["blob"] = json!("y".repeat(COMPACT_MIN_JOURNAL_BYTES as usize / 2));
    store.commit(&[Change::Put(half.clone())], GRANT).unwrap();
    assert!(file_len(&journal) > COMPACT_MIN_JOURNAL_BYTES / 2);
    assert_eq!(store.state().serial, 1);
    drop(store);
    let store = open(&path);
    assert_eq!(store.state().get("big"), Some(&big));
    assert_eq!(store.state().get("half"), Some(&half));
}

#[test]
fn files_are_private_to_the_owner() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    store.commit(&[put("secret", 1)], GRANT).unwrap();
    let paths = StatePaths::new(&path);
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&paths.journal), 0o600);
    assert_eq!(mode(&paths.lock), 0o600);
    store.compact().unwrap();
    assert_eq!(mode(&paths.snapshot), 0o600);
    drop(store);

    // Files made readable by someone else are narrowed again on open.
    for p in [&paths.journal, &paths.lock] {
        fs::set_permissions(p, fs::Permissions::from_mode(0o644)).unwrap();
    }
    let mut store = open(&path);
    store.commit(&[put("secret", 2)], GRANT).unwrap();
    store.close().unwrap();
    for p in [&paths.snapshot, &paths.journal, &paths.lock] {
        assert_eq!(mode(p), 0o600, "{}", p.display());
    }
}

#[test]
fn a_second_opener_is_refused_and_told_who_holds_the_lock() {
    let (_dir, path) = temp_state();
    let first = Store::open(&path, holder("nivis apply (first)"), None).unwrap();

    let start = Instant::now();
    let err = Store::open(&path, holder("second"), None).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "no wait: fails at once"
    );
    let StateError::Locked {
        holder: Some(h), ..
    } = &err
    else {
        panic!("expected Locked with a holder, got {err:?}")
    };
    assert_eq!(h.pid, std::process::id());
    assert_eq!(h.command, "nivis apply (first)");
    let text = err.to_string();
    for needle in [
        format!("pid {}", std::process::id()),
        "`nivis apply (first)`".to_string(),
        format!("host {}", h.host),
        format!("user {}", h.user),
        "since ".to_string(),
        "nivis force-unlock".to_string(),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing from {text}");
    }

    let start = Instant::now();
    let wait = Duration::from_millis(300);
    let err = Store::open(&path, holder("second"), Some(wait)).unwrap_err();
    let waited = start.elapsed();
    assert!(matches!(err, StateError::Locked { .. }), "{err:?}");
    assert!(waited >= wait && waited < wait * 4, "waited {waited:?}");

    // Read-only access needs no lock.
    assert!(Store::read_only(&path).is_ok());

    drop(first);
    let second = Store::open(&path, holder("second"), None).unwrap();
    drop(second);
}

#[test]
fn a_waiting_opener_gets_the_lock_when_it_is_released() {
    let (_dir, path) = temp_state();
    let first = Store::open(&path, holder("first"), None).unwrap();
    let start = Instant::now();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        drop(first);
    });
    let store = Store::open(&path, holder("second"), Some(Duration::from_secs(10))).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(150));
    releaser.join().unwrap();
    drop(store);
}

#[test]
fn force_unlock_reports_free_locks_and_removes_held_ones() {
    let (_dir, path) = temp_state();
    let lock_path = StatePaths::new(&path).lock;
    let yes = &mut |_: Option<&LockHolder>| true;
    assert_eq!(
        Store::force_unlock(&path, "any", false, yes).unwrap(),
        ForceUnlock::NotLocked
    );

    let stuck = holder("stuck");
    let first = Store::open(&path, stuck.clone(), None).unwrap();
    // This process holds it, alive: only --force removes it.
    let outcome = Store::force_unlock(&path, &stuck.id, true, yes).unwrap();
    let ForceUnlock::Removed { holder: Some(h) } = &outcome else {
        panic!("expected Removed with a holder, got {outcome:?}")
    };
    assert_eq!((h.pid, h.command.as_str()), (std::process::id(), "stuck"));
    assert!(outcome.to_string().contains("removed the lock "));
    assert!(!lock_path.exists());

    // The next opener creates a fresh lock file, even though `first` still holds the old one.
    let second = Store::open(&path, holder("after"), None).unwrap();
    assert!(lock_path.exists());
    drop(first);
    drop(second);
    assert_eq!(
        Store::force_unlock(&path, "any", false, yes).unwrap(),
        ForceUnlock::NotLocked,
        "an existing but free lock file is left alone"
    );
    assert!(lock_path.exists());
}

/// Makes every later journal write of `store` fail (EBADF) as a failing disk would, while the
/// journal itself stays whole.
fn break_journal(store: &mut Store) {
    store.journal = File::open(&store.paths.journal).unwrap();
}

fn mend_journal(store: &mut Store) {
    store.journal = OpenOptions::new()
        .read(true)
        .append(true)
        .open(&store.paths.journal)
        .unwrap();
}

#[test]
fn a_failed_commit_is_retried_after_the_journal_is_checked() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    store.commit(&[put("a", 1)], GRANT).unwrap();
    let journal_before = fs::read(journal_path(&path)).unwrap();
    break_journal(&mut store);
    let err = store.commit(&[put("b", 2)], GRANT).unwrap_err();
    assert!(
        matches!(
            err,
            StateError::Io {
                op: "append to",
                ..
            }
        ),
        "{err}"
    );
    assert!(!store.state().contains("b"), "not applied in memory");
    assert!(matches!(
        store.commit(&[put("c", 3)], GRANT),
        Err(StateError::Poisoned { .. })
    ));
    assert!(
        store.recommit(&[put("b", 2)], GRANT).is_err(),
        "still failing"
    );
    assert_eq!(fs::read(journal_path(&path)).unwrap(), journal_before);
    mend_journal(&mut store);
    store.recommit(&[put("b", 2)], GRANT).unwrap();
    store.commit(&[put("c", 3)], GRANT).unwrap();
    drop(store);
    assert_eq!(
        open(&path).state().ids().collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
}

#[test]
fn what_the_journal_cannot_take_is_rescued_and_folded_in_first() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    store.commit(&[put("a", 1)], GRANT).unwrap();
    let lineage = store.state().lineage.clone();
    break_journal(&mut store);
    assert!(store.commit(&[put("b", 2)], GRANT).is_err());
    let rescued = store
        .rescue(&[put("b", 2), Change::Remove("a".into())], GRANT)
        .unwrap();
    assert_eq!(rescued, StatePaths::new(&path).rescue);
    assert_eq!(
        fs::metadata(&rescued).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        store.rescue(&[put("x", 9)], GRANT).is_err(),
        "never over an existing file"
    );
    assert!(store.close().is_err(), "a poisoned store says so on close");

    // Readers see it; the next writer commits it first, then removes it.
    assert_eq!(
        Store::read_only(&path).unwrap().ids().collect::<Vec<_>>(),
        ["b"]
    );
    let store = open(&path);
    assert_eq!(store.state().ids().collect::<Vec<_>>(), ["b"]);
    assert_eq!(store.state().lineage, lineage);
    assert!(!rescued.exists());
    assert_eq!(
        store.recovered(),
        ["b", "a"],
        "the open says what it recorded"
    );
    let warnings = crate::state::LockedStore::warnings(&store);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("rescue file") && w.contains("b, a")),
        "{warnings:?}"
    );
    drop(store);
    assert_eq!(open(&path).state().ids().collect::<Vec<_>>(), ["b"]);

    // A rescue file planted as a symlink is refused, not followed.
    let elsewhere = path.with_file_name("elsewhere");
    fs::write(&elsewhere, "{}").unwrap();
    std::os::unix::fs::symlink(&elsewhere, &rescued).unwrap();
    assert!(Store::open(&path, holder("test"), None).is_err());
}

#[test]
fn replace_writes_a_new_snapshot_above_both_serials() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    store.commit(&[put("a", 1)], GRANT).unwrap();
    store.compact().unwrap();
    store.commit(&[put("b", 2)], GRANT).unwrap();
    let serial = store.state().serial;
    let mut pushed = StateFile::with_lineage("pushed-lineage");
    pushed.apply(&put("c", 3));
    store.replace(pushed, GRANT).unwrap();
    let state = store.state();
    assert_eq!(state.ids().collect::<Vec<_>>(), ["c"]);
    assert_eq!(state.lineage, "pushed-lineage");
    assert_eq!(state.serial, serial + 1);
    assert_eq!(
        fs::metadata(&StatePaths::new(&path).journal).unwrap().len(),
        0
    );
    drop(store);
    let again = open(&path);
    assert_eq!(again.state().ids().collect::<Vec<_>>(), ["c"]);
    assert_eq!(again.state().serial, serial + 1);
    drop(again);

    // A pushed state with a higher serial keeps going from there.
    let mut store = open(&path);
    let mut newer = store.state().clone();
    newer.serial = 50;
    store.replace(newer, GRANT).unwrap();
    assert_eq!(store.state().serial, 51);
}

#[test]
fn a_state_that_never_recorded_anything_adopts_the_rescued_lineage() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    let lineage = store.state().lineage.clone();
    break_journal(&mut store);
    assert!(store.commit(&[put("a", 1)], GRANT).is_err());
    store.rescue(&[put("a", 1)], GRANT).unwrap();
    drop(store);
    let store = open(&path);
    assert_eq!(store.state().lineage, lineage);
    assert!(store.state().contains("a"));
}

#[test]
fn whole_journal_lines_are_never_dropped_and_keep_unknown_fields() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    store.commit(&[put("a", 1)], GRANT).unwrap();
    let (lineage, serial) = (store.state().lineage.clone(), store.state().serial);
    drop(store);
    // A newer release of the same version added a field to the record and to the resource.
    let mut b = serde_json::to_value(res("b", 2)).unwrap();
    b["addedLater"] = json!({"n": 1});
    let line = json!({"schemaVersion": 3, "lineage": lineage, "serial": serial,
        "changes": [{"put": b}], "committedBy": "a newer nivis"});
    let mut journal = fs::read(journal_path(&path)).unwrap();
    journal.extend_from_slice(format!("{line}\n").as_bytes());
    fs::write(journal_path(&path), &journal).unwrap();
    let read = Store::read_only(&path).unwrap();
    assert_eq!(read.get("b").unwrap().extra["addedLater"], json!({"n": 1}));
    let store = open(&path);
    assert!(
        store.state().contains("b"),
        "the last whole line was applied"
    );
    drop(store);
    let snapshot: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        snapshot["resources"]["b"]["addedLater"],
        json!({"n": 1}),
        "carried through the compaction"
    );

    // A whole last line of a newer major version: refused, naming it; nothing truncated.
    let mut store = open(&path);
    store.commit(&[put("c", 3)], GRANT).unwrap();
    drop(store);
    let mut journal = fs::read(journal_path(&path)).unwrap();
    journal.extend_from_slice(b"{\"schemaVersion\": 4, \"lineage\": \"x\"}\n");
    fs::write(journal_path(&path), &journal).unwrap();
    for err in [
        Store::read_only(&path).unwrap_err(),
        Store::open(&path, holder("test"), None).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                StateError::UnsupportedVersion {
                    found: 4,
                    line: Some(2),
                    ..
                }
            ),
            "{err:?}"
        );
    }
    assert_eq!(
        fs::read(journal_path(&path)).unwrap(),
        journal,
        "left untouched"
    );
}

#[test]
fn a_symlinked_state_path_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    // link -> chain -> real/state.json (dangling until the first compaction writes it).
    std::os::unix::fs::symlink("real/state.json", dir.path().join("chain")).unwrap();
    std::os::unix::fs::symlink("chain", dir.path().join("link")).unwrap();
    let link = dir.path().join("link");
    let mut store = open(&link);
    store.commit(&[put("a", 1)], GRANT).unwrap();
    store.close().unwrap();
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(real.join("state.json").is_file());
    assert!(real.join("state.json.journal").is_file());
    assert_eq!(
        Store::read_only(&link).unwrap().ids().collect::<Vec<_>>(),
        ["a"]
    );

    let err = Store::open(&real, holder("test"), None).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
    std::os::unix::fs::symlink("loop2", dir.path().join("loop1")).unwrap();
    std::os::unix::fs::symlink("loop1", dir.path().join("loop2")).unwrap();
    let err = Store::read_only(dir.path().join("loop1")).unwrap_err();
    assert!(err.to_string().contains("symbolic links"), "{err}");
}

#[test]
fn a_full_filesystem_is_reported_while_commits_still_fit() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: mounting a small tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = crate::child::command("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "tmpfs"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(mounted.success());
    let path = dir.path().join("s.json");
    let mut store = open(&path);
    assert!(store.space_error().is_none());
    let mut n = 0;
    while store.space_error().is_none() {
        let mut r = res(&format!("r{n}"), n);
        r.attributes["pad"] = json!("x".repeat(8000));
        store.commit(&[Change::Put(r)], GRANT).unwrap();
        n += 1;
        assert!(n < 1000, "the reserve never ran out");
    }
    let err = store.space_error().unwrap().to_string();
    assert!(err.contains("No space left on device"), "{err}");
    // What is running still fits: the kept space takes several more records.
    for i in 0..10 {
        let mut r = res(&format!("late{i}"), i);
        r.attributes["pad"] = json!("y".repeat(8000));
        store.commit(&[Change::Put(r)], GRANT).unwrap();
    }
    drop(store);
    let _ = crate::child::command("umount")
        .arg("-l")
        .arg(dir.path())
        .status();
}

#[test]
fn a_version_2_journal_line_is_read_with_its_snake_case_keys() {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    store.commit(&[put("a", 1)], GRANT).unwrap();
    let (lineage, serial) = (store.state().lineage.clone(), store.state().serial);
    drop(store);
    // A line as version 2 wrote it: snake_case resource keys.
    let mut b = serde_json::to_value(res("b", 2)).unwrap();
    let object = b.as_object_mut().unwrap();
    for (new, old) in [
        ("providerSource", "provider_source"),
        ("typeName", "type_name"),
        ("schemaVersion", "schema_version"),
        ("sensitivePaths", "sensitive_paths"),
        ("createBeforeDestroy", "create_before_destroy"),
    ] {
        let value = object.remove(new).unwrap();
        object.insert(old.into(), value);
    }
    let line = json!({"schemaVersion": 2, "lineage": lineage, "serial": serial,
        "changes": [{"put": b}, {"remove": "a"}]});
    let mut journal = fs::read(journal_path(&path)).unwrap();
    journal.extend_from_slice(format!("{line}\n").as_bytes());
    fs::write(journal_path(&path), &journal).unwrap();
    let read = Store::read_only(&path).unwrap();
    assert_eq!(read.get("b"), Some(&res("b", 2)));
    assert!(!read.contains("a"));
    // Opening compacts: the snapshot is written as version 3.
    drop(open(&path));
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"schemaVersion\": 3"), "{text}");
    assert!(
        text.contains("\"typeName\"") && !text.contains("type_name"),
        "{text}"
    );
}

#[test]
fn the_serial_read_alone_is_the_one_read_only_reports() {
    let (_dir, path) = temp_state();
    let agree = |what: &str| {
        let whole = Store::read_only(&path).map(|s| s.serial).ok();
        assert_eq!(Store::read_serial(&path).ok(), whole, "{what}");
        whole
    };
    assert_eq!(agree("no state at all"), Some(0));
    let mut store = open(&path);
    store.commit(&[put("a", 1)], GRANT).unwrap();
    drop(store);
    agree("a journal without a snapshot");
    let store = open(&path);
    store.close().unwrap();
    assert_eq!(agree("a snapshot"), Some(1));
    let mut store = open(&path);
    store.commit(&[put("b", 2)], GRANT).unwrap();
    drop(store);
    assert_eq!(agree("a snapshot and journal records"), Some(1));
    let store = open(&path);
    store.close().unwrap();
    assert_eq!(agree("compacted again"), Some(2));
    // The first release's spelling of the version, and formats this build does not read.
    let mut legacy: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let map = legacy.as_object_mut().unwrap();
    let version = map.remove("schemaVersion").unwrap();
    map.insert("schema_version".into(), json!(1));
    // Version 1 had no state keys (DESIGN §93): a version 1 file never carries them.
    let keys = map.remove("keys");
    std::fs::write(&path, serde_json::to_vec(&legacy).unwrap()).unwrap();
    assert_eq!(agree("version 1"), Some(2));
    legacy["schema_version"] = json!(99);
    std::fs::write(&path, serde_json::to_vec(&legacy).unwrap()).unwrap();
    assert_eq!(agree("a newer format"), None);
    let map = legacy.as_object_mut().unwrap();
    map.remove("schema_version");
    map.insert("schemaVersion".into(), version);
    if let Some(keys) = keys {
        map.insert("keys".into(), keys);
    }
    map.insert("serial".into(), json!("two"));
    std::fs::write(&path, serde_json::to_vec(&legacy).unwrap()).unwrap();
    assert_eq!(agree("a serial that is not a number"), None);
}

/// An audit record of a run that left the state at `serial_after` (`None`: it wrote nothing).
fn audit_record(path: &Path, serial_after: Option<u64>) {
    let entry = crate::state::audit::Entry {
        time: "2026-01-01T00:00:00Z".into(),
        user: "u".into(),
        uid: 1000,
        host: "h".into(),
        ci_job: None,
        command: "nivis apply".into(),
        env: "default".into(),
        saved_plan_sha256: None,
        plan_digest: None,
        serial_before: None,
        serial_after,
        changes: Vec::new(),
        policy_overrides: Vec::new(),
        result: "ok".into(),
    };
    let log = crate::state::audit::Log::Local(crate::state::audit::local_path(path));
    log.append(entry, None).unwrap();
}

#[test]
fn a_vanished_state_beside_its_backup_is_refused_until_started_over() {
    let (_dir, path) = temp_state();
    for (id, n) in [("a", 1), ("b", 2)] {
        let mut store = open(&path);
        store.commit(&[put(id, n)], GRANT).unwrap();
        store.close().unwrap();
    }
    let paths = StatePaths::new(&path);
    assert!(
        paths.backup.exists(),
        "the second run kept the first snapshot"
    );
    fs::remove_file(&path).unwrap();
    fs::remove_file(&paths.journal).unwrap();

    let err = Store::open(&path, holder("t"), None).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StateError::Lost(_)), "{text}");
    assert!(
        text.contains(&format!("the backup {} (serial 1)", paths.backup.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("cp -p {}", paths.backup.display())),
        "{text}"
    );
    assert!(matches!(Store::read_only(&path), Err(StateError::Lost(_))));
    assert!(!path.exists(), "a refusal writes no snapshot");

    // Replacing the whole state (a push) opens it empty and writes nothing yet.
    let replacing = Store::open_as(&path, holder("t"), None, IfLost::Replace).unwrap();
    assert!(replacing.state().is_empty());
    drop(replacing);
    assert!(!path.exists());

    let store = Store::open_as(&path, holder("t"), None, IfLost::StartOver).unwrap();
    assert!(store.state().is_empty());
    assert_eq!(store.state().serial, 2, "after the lost serial 1");
    drop(store);
    assert!(path.exists(), "starting over is recorded at once");
    assert_eq!(Store::read_only(&path).unwrap().serial, 2);
    assert_eq!(open(&path).state().serial, 2);
}

#[test]
fn audit_records_with_a_serial_show_a_state_existed_and_others_do_not() {
    let (_dir, path) = temp_state();
    audit_record(&path, None);
    assert!(
        Store::read_only(&path).unwrap().is_empty(),
        "a run that wrote nothing leaves no state behind"
    );
    audit_record(&path, Some(3));
    audit_record(&path, None);
    let err = Store::read_only(&path).unwrap_err().to_string();
    assert!(err.contains("3 audit record(s)"), "{err}");
    assert!(err.contains("up to serial 3"), "{err}");
    assert!(
        !err.contains("restore the backup"),
        "no backup to restore: {err}"
    );
    let store = Store::open_as(&path, holder("t"), None, IfLost::StartOver).unwrap();
    assert_eq!(store.state().serial, 4);
}
