//! The last good snapshot is kept, and every "restore from a backup" message names it: a local
//! state keeps `P.backup` (0600) beside it, an S3 state the object `KEY.backup` (issue 29).

use std::os::unix::fs::PermissionsExt;

use super::remote::{tokens, Machine};
use super::weed::Weed;
use crate::util::*;

#[test]
fn a_local_state_keeps_its_last_good_snapshot_as_a_private_backup_named_when_corrupt() {
    let p = Project::new(&tokens(2, "b"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let first = std::fs::read(&p.state).unwrap();
    p.set_plan(&tokens(3, "b"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let backup = std::path::PathBuf::from(format!("{}.backup", p.state.display()));
    assert_eq!(
        std::fs::read(&backup).expect("a backup beside the state"),
        first,
        "the backup is the snapshot before the last run"
    );
    let mode = std::fs::metadata(&backup).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // The state is damaged: the message names the backup, and the backup restores it.
    std::fs::write(&p.state, b"{ torn").unwrap();
    let plan = p.run(&["plan"], &[]);
    assert!(!plan.status.success());
    assert!(
        stderr(&plan).contains(&backup.display().to_string()),
        "{}",
        stderr(&plan)
    );
    std::fs::copy(&backup, &p.state).unwrap();
    let plan = p.run(&["plan"], &[]);
    assert_success(&plan);
    assert!(stdout(&plan).contains("1 to create"), "{}", stdout(&plan));
}

#[test]
fn an_s3_state_keeps_its_previous_snapshot_object_named_when_corrupt() {
    let weed = Weed::start();
    let key = "team/backup.state";
    let m = Machine::new(&weed, key, &tokens(2, "s"));
    let client = weed.client();
    assert_success(&m.run(&["apply"], &["--auto-approve"]));
    let first = client.get(key).unwrap().expect("a snapshot").body;
    m.project.set_plan(&tokens(3, "s"));
    assert_success(&m.run(&["apply"], &["--auto-approve"]));
    let backup = client
        .get(&format!("{key}.backup"))
        .unwrap()
        .expect("a backup object beside the snapshot");
    assert_eq!(
        backup.body, first,
        "the backup is the snapshot before the last run"
    );

    client
        .put(key, b"{ torn", nivis::state::s3::Condition::Always)
        .unwrap();
    let plan = m.run(&["plan"], &[]);
    assert!(!plan.status.success());
    assert!(
        stderr(&plan).contains(&format!("{key}.backup")),
        "{}",
        stderr(&plan)
    );
    client
        .put(key, &backup.body, nivis::state::s3::Condition::Always)
        .unwrap();
    // The restored snapshot's journal namespace (the last run's commits) is still there until
    // the next compaction, so nothing is lost.
    let plan = m.run(&["plan"], &[]);
    assert_success(&plan);
    assert!(stdout(&plan).contains("No changes"), "{}", stdout(&plan));
}
