//! Crash-recovery tests of the file store: torn and garbled journal ends, corrupt lines, foreign
//! journals, interrupted compactions, and a real kill -9 of a committing child process.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::testutil::{file_len, holder, journal_path, open, put, temp_state, GRANT};
use super::{Change, MemoryStore, ResourceState, StateError, StateFile, StateStore, Store};

/// Builds a store with a snapshot (3 resources) and a journal of `lines` records; returns the
/// snapshot bytes, the journal bytes and the state after each journal line (index 0: before
/// the first).
fn snapshot_and_journal(lines: u64) -> (Vec<u8>, Vec<u8>, Vec<StateFile>) {
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    store
        .commit(&[put("a", 1), put("b", 2), put("c", 3)], GRANT)
        .unwrap();
    store.compact().unwrap();
    let mut states = vec![store.state().clone()];
    for i in 0..lines {
        let mut changes = vec![put(&format!("j{i}"), i)];
        if i % 2 == 1 {
            changes.push(Change::Remove("a".into()));
            changes.push(put("b", 100 + i));
        }
        store.commit(&changes, GRANT).unwrap();
        states.push(store.state().clone());
    }
    drop(store);
    (
        fs::read(&path).unwrap(),
        fs::read(journal_path(&path)).unwrap(),
        states,
    )
}

fn write_state(path: &Path, snapshot: &[u8], journal: &[u8]) {
    fs::write(path, snapshot).unwrap();
    fs::write(journal_path(path), journal).unwrap();
}

#[test]
fn every_truncation_of_the_last_line_recovers_the_previous_state() {
    let (snapshot, journal, states) = snapshot_and_journal(4);
    let last_start = journal[..journal.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    let before = &states[3];
    assert_ne!(before.resources, states[4].resources);
    for cut in last_start..journal.len() {
        let (_dir, path) = temp_state();
        write_state(&path, &snapshot, &journal[..cut]);
        let read = Store::read_only(&path).unwrap();
        assert_eq!(read.resources, before.resources, "read_only, cut at {cut}");
        assert_eq!(fs::read(journal_path(&path)).unwrap(), &journal[..cut]);

        let store = Store::open(&path, holder("test"), None)
            .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(store.state().resources, before.resources, "cut at {cut}");
        assert_eq!(store.state().lineage, before.lineage);
        assert_eq!(
            file_len(&journal_path(&path)),
            0,
            "torn end removed, compacted"
        );
        drop(store);
        assert_eq!(open(&path).state().resources, before.resources);
    }
    // The whole line (with its newline) is a committed record.
    let (_dir, path) = temp_state();
    write_state(&path, &snapshot, &journal);
    assert_eq!(open(&path).state().resources, states[4].resources);
}

#[test]
fn a_garbled_final_line_is_dropped() {
    let (snapshot, mut journal, states) = snapshot_and_journal(3);
    let last_start = journal[..journal.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    // Blocks written out of order: the line has its full length but zeros inside.
    let end = journal.len() - 1;
    journal[last_start + 5..end].fill(0);
    let (_dir, path) = temp_state();
    write_state(&path, &snapshot, &journal);
    assert_eq!(open(&path).state().resources, states[2].resources);

    // A file extended past its data: trailing zeros after the last whole line.
    let (snapshot, mut journal, states) = snapshot_and_journal(3);
    journal.extend_from_slice(&[0; 100]);
    let (_dir, path) = temp_state();
    write_state(&path, &snapshot, &journal);
    assert_eq!(open(&path).state().resources, states[3].resources);
}

#[test]
fn a_corrupt_middle_line_is_an_error_naming_it() {
    let (snapshot, mut journal, _) = snapshot_and_journal(5);
    let second_line = journal.iter().position(|&b| b == b'\n').unwrap() + 1;
    journal[second_line] = b'x';
    let (_dir, path) = temp_state();
    write_state(&path, &snapshot, &journal);
    for result in [
        Store::read_only(&path).map(|_| ()),
        Store::open(&path, holder("test"), None).map(|_| ()),
    ] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, StateError::Corrupt { line: Some(2), path: p, .. } if *p == journal_path(&path)),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("journal line 2 is corrupt"),
            "{err}"
        );
    }
    assert_eq!(
        fs::read(journal_path(&path)).unwrap(),
        journal,
        "left untouched"
    );
}

#[test]
fn an_interrupted_compaction_replays_cleanly() {
    // Crash after the new snapshot was renamed into place but before the journal was emptied.
    let (_dir, path) = temp_state();
    let mut store = open(&path);
    store.commit(&[put("a", 1)], GRANT).unwrap();
    store
        .commit(&[put("b", 2), Change::Remove("a".into())], GRANT)
        .unwrap();
    let old_journal = fs::read(journal_path(&path)).unwrap();
    store.compact().unwrap();
    let expected = store.state().clone();
    drop(store);
    fs::write(journal_path(&path), &old_journal).unwrap();
    assert_eq!(Store::read_only(&path).unwrap(), expected);
    let mut store = open(&path);
    assert_eq!(store.state().resources, expected.resources);
    assert_eq!(file_len(&journal_path(&path)), 0);
    store.commit(&[put("c", 3)], GRANT).unwrap();
    drop(store);
    assert!(open(&path).state().contains("c"));
}

#[test]
fn a_foreign_or_newer_journal_is_refused() {
    let (snapshot, journal, _) = snapshot_and_journal(2);
    // Another state's snapshot with this journal: lineage mismatch.
    let mut other: StateFile = serde_json::from_slice(&snapshot).unwrap();
    other.lineage = "someone-else".into();
    let (_dir, path) = temp_state();
    write_state(&path, &serde_json::to_vec(&other).unwrap(), &journal);
    let err = Store::open(&path, holder("test"), None).unwrap_err();
    assert!(err.to_string().contains("another state"), "{err}");

    // A snapshot older than its journal (restored from a backup).
    let mut older: StateFile = serde_json::from_slice(&snapshot).unwrap();
    older.serial -= 1;
    write_state(&path, &serde_json::to_vec(&older).unwrap(), &journal);
    let err = Store::read_only(&path).unwrap_err();
    assert!(
        matches!(err, StateError::Corrupt { line: Some(1), .. }),
        "{err}"
    );

    // A journal without its snapshot that does not start at serial 0.
    fs::remove_file(&path).unwrap();
    let err = Store::read_only(&path).unwrap_err();
    assert!(err.to_string().contains("state file is missing"), "{err}");
}

#[test]
fn a_newer_format_is_refused_by_version() {
    let (_dir, path) = temp_state();
    for newer in [
        r#"{"schemaVersion": 4, "whatever": true}"#,
        r#"{"schema_version": 4, "whatever": true}"#,
    ] {
        fs::write(&path, newer).unwrap();
        let err = Store::open(&path, holder("test"), None).unwrap_err();
        assert!(
            matches!(
                err,
                StateError::UnsupportedVersion {
                    found: 4,
                    supported: 3,
                    line: None,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), newer, "left untouched");
    }
    fs::write(&path, "{ not json").unwrap();
    let err = Store::read_only(&path).unwrap_err();
    assert!(
        matches!(err, StateError::Corrupt { line: None, .. }),
        "{err:?}"
    );
}

// ---- kill -9 ----------------------------------------------------------------------------

const KILL_CHILD_ENV: &str = "NIVIS_STATE_KILL9_CHILD";

/// The batch the child commits as its `i`-th commit (i >= 1).
fn kill_batch(i: u64) -> Vec<Change> {
    let mut changes = vec![put(&format!("r{i}"), i)];
    if i.is_multiple_of(3) {
        changes.push(put(&format!("r{}", i - 1), i * 1000));
    }
    if i.is_multiple_of(5) {
        changes.push(Change::Remove(format!("r{}", i - 2)));
    }
    changes
}

fn resources_after(commits: u64) -> BTreeMap<String, ResourceState> {
    let mut memory = MemoryStore::new();
    for i in 1..=commits {
        StateStore::commit(&mut memory, &kill_batch(i), GRANT).unwrap();
    }
    memory.into_state().resources
}

/// Not a test on its own: the child process of `kill9_loses_no_reported_commit`. Commits
/// forever, printing each count after its commit returns, compacting now and then.
#[test]
fn kill9_child() {
    let Some(path) = std::env::var_os(KILL_CHILD_ENV) else {
        return;
    };
    let mut store =
        Store::open(&path, holder("kill9 child"), Some(Duration::from_secs(10))).unwrap();
    let mut stdout = io::stdout().lock();
    for i in 1.. {
        store.commit(&kill_batch(i), GRANT).unwrap();
        writeln!(stdout, "committed {i}").unwrap();
        stdout.flush().unwrap();
        if i.is_multiple_of(25) {
            store.compact().unwrap();
        }
        // Stand-in for provider work between commits, so kills also land between commits.
        std::thread::sleep(Duration::from_micros(i % 4 * 300));
    }
}

fn random_u64() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now())
}

#[test]
fn kill9_loses_no_reported_commit() {
    let crate_relative = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    let child_test = format!("{crate_relative}::kill9_child");
    for round in 0..6 {
        let (_dir, path) = temp_state();
        let seed = random_u64();
        let target = 5 + seed % 120;
        let extra = Duration::from_micros((seed >> 16) % 4000);
        let mut child = crate::child::command(std::env::current_exe().unwrap())
            .args([&child_test, "--exact", "--nocapture", "--test-threads=1"])
            .env(KILL_CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let count = |line: io::Result<String>| {
            let line = line.unwrap();
            line.strip_prefix("committed ")
                .map(|n| n.parse::<u64>().unwrap())
        };
        let mut reported = 0u64;
        for line in lines.by_ref() {
            reported = count(line).unwrap_or(reported);
            if reported >= target {
                break;
            }
        }
        std::thread::sleep(extra);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for line in lines {
            reported = count(line).unwrap_or(reported);
        }
        assert!(
            reported >= target,
            "round {round}: child stopped at {reported}"
        );

        let store = Store::open(&path, holder("after kill"), None)
            .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        let got = &store.state().resources;
        // Every reported commit is there; at most the one in flight may be there too.
        let in_flight = reported + 1;
        assert!(
            *got == resources_after(reported) || *got == resources_after(in_flight),
            "round {round}: state after kill matches neither {reported} nor {in_flight} \
             commits; has {} resources",
            got.len()
        );
    }
}
