//! The audit log of an S3 state: one object per record, `KEY.audit/NNNNNNNNNNNN` (the record's
//! sequence number), created with `If-None-Match: *` so two writers can never both write record
//! `N`: the one refused reads the new last record and chains onto it.
//!
//! Owns the objects' names and the conditional append. Not: the record format or the chain
//! (`state::audit`). Records hold no values, so they are written in plain text even when the
//! state is encrypted (they hold addresses, users and hosts).

use super::client::{Client, Condition, S3Error};
use super::config::S3Backend;
use crate::state::audit::{AuditError, Entry, Record, Stored};
use crate::state::StateError;

/// How often a refused append is tried again on top of a newer last record.
const APPEND_TRIES: u32 = 20;

/// The audit objects beside one state.
pub(crate) struct ObjectLog {
    client: Client,
    prefix: String,
    bucket: String,
}

impl ObjectLog {
    /// The log beside `backend`'s state (of its environment).
    pub(crate) fn new(backend: &S3Backend) -> Result<ObjectLog, StateError> {
        Ok(ObjectLog {
            client: backend.client()?,
            prefix: format!("{}.audit/", backend.key()),
            bucket: backend.target.bucket.clone(),
        })
    }

    /// `s3://bucket/KEY.audit/`.
    pub(crate) fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    fn name(&self, seq: u64) -> String {
        format!("{}{seq:012}", self.prefix)
    }

    fn fail(&self, what: &'static str, source: S3Error) -> AuditError {
        AuditError::S3 {
            what,
            log: self.describe(),
            source,
        }
    }

    /// The record stored last (by name), if any.
    fn last(&self) -> Result<Option<Record>, AuditError> {
        let names = self
            .client
            .list(&self.prefix)
            .map_err(|e| self.fail("list", e))?;
        let Some(name) = names.last() else {
            return Ok(None);
        };
        let object = self
            .client
            .get(name)
            .map_err(|e| self.fail("read", e))?
            .ok_or_else(|| AuditError::Vanished { name: name.clone() })?;
        serde_json::from_slice(&object.body)
            .map(Some)
            .map_err(|source| AuditError::NotARecord {
                name: name.clone(),
                source,
            })
    }

    /// Appends `entry` as the record after the last one.
    pub(crate) fn append(
        &self,
        entry: Entry,
        key: Option<&[u8; 32]>,
    ) -> Result<Record, AuditError> {
        for _ in 0..APPEND_TRIES {
            let last = self.last()?;
            let record = Record::next(last.as_ref(), entry.clone(), key);
            let name = self.name(record.seq);
            let body = record.to_line();
            match self.client.put(&name, body.as_bytes(), Condition::Absent) {
                Ok(_) => return Ok(record),
                // A retried PUT whose first attempt landed: the record is ours.
                Err(S3Error::PreconditionFailed { attempts, .. })
                    if attempts > 1 && self.holds(&name, body.as_bytes()) =>
                {
                    return Ok(record)
                }
                // Another run wrote record N first: chain onto it.
                Err(S3Error::PreconditionFailed { .. }) => continue,
                Err(e) => return Err(self.fail("append to", e)),
            }
        }
        Err(AuditError::Contended {
            log: self.describe(),
        })
    }

    fn holds(&self, name: &str, body: &[u8]) -> bool {
        matches!(self.client.get(name), Ok(Some(o)) if o.body == body)
    }

    /// Every record object, in name order.
    pub(crate) fn read(&self) -> Result<Vec<Stored>, AuditError> {
        let names = self
            .client
            .list(&self.prefix)
            .map_err(|e| self.fail("list", e))?;
        let mut stored = Vec::new();
        for name in names {
            let Some(object) = self.client.get(&name).map_err(|e| self.fail("read", e))? else {
                continue;
            };
            stored.push(Stored {
                named_seq: name.strip_prefix(&self.prefix).and_then(|n| n.parse().ok()),
                place: name,
                bytes: object.body,
            });
        }
        Ok(stored)
    }
}
