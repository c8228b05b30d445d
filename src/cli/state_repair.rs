//! `nivis state repair`: what it prints around `state::s3::repair`.
//!
//! Owns: the words of the report and the refusal for a local state. Not: the repair itself
//! (`state::s3::store::repair`).

use std::time::Duration;

use super::args::StateTarget;
use super::{backend, exit, fail};
use crate::render::{self, outln};
use crate::secrets::Redactor;
use crate::state::s3::{repair, Repair};
use crate::state::{Backend, LockHolder, Mutation};

pub(super) fn run(
    t: &StateTarget,
    dry_run: bool,
    wait: Option<Duration>,
    redactor: &Redactor,
    audit: &super::audit::AuditRecord,
) -> i32 {
    let chosen = match backend::of(&t.source, &t.state, redactor) {
        Ok(b) => b,
        Err(e) => return fail(redactor, &e),
    };
    let Backend::S3 { backend: s3, .. } = &chosen else {
        return fail(
            redactor,
            &format!(
            "{} is a local state: its journal is one file, with no segments to lose; a damaged \
             one is named by the \"corrupt\" message, and the backup beside it ({}.backup) \
             restores the last good snapshot. Nothing was changed",
            chosen.describe(),
            chosen.describe()
        ),
        );
    };
    if !dry_run {
        audit.begin(&chosen, "nivis state repair");
    }
    let holder = LockHolder::current("nivis state repair");
    let write = (!dry_run).then(|| Mutation::for_state_verb("state repair"));
    match repair(s3, holder, wait, write) {
        Ok(done) => {
            outln!(
                "{}",
                render::escape(redactor, &report(&chosen.describe(), &done, dry_run))
            );
            exit::OK
        }
        Err(e) => fail(redactor, &e),
    }
}

fn report(url: &str, r: &Repair, dry_run: bool) -> String {
    let Some(missing) = &r.missing else {
        return format!(
            "The journal of {url} is whole ({} segment(s)): nothing to repair.",
            r.kept
        );
    };
    let lost = if r.lost_addresses.is_empty() {
        "none readable".to_string()
    } else {
        r.lost_addresses.join(", ")
    };
    let head = if dry_run { "Would repair" } else { "Repaired" };
    let mut text = format!(
        "{head} {url}: the journal segment {missing} is missing. Kept: the snapshot and the {} \
         segment(s) before it ({} resource(s)). Lost: {} segment(s) after it ({}); the \
         resources they recorded: {lost}.",
        r.kept,
        r.resources,
        r.lost_segments.len(),
        r.lost_segments.join(", ")
    );
    if dry_run {
        text.push_str(&format!(
            " Nothing was changed; without --dry-run the broken journal is copied to {} and a \
             new snapshot written.",
            r.backup
        ));
    } else {
        text.push_str(&format!(
            " The broken journal is kept under {}. The lost resources' objects may exist: run \
             `nivis plan`, then adopt each with `nivis import ADDRESS ID` rather than create it \
             again.",
            r.backup
        ));
    }
    text
}
