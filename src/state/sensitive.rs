//! What a state teaches a run's redactor: the values at each record's sensitive paths.
//!
//! Owns: finding those values in a record and its deposed objects. Not: what counts as a
//! secret's form or how it is masked (`secrets`), which paths are sensitive (the provider's
//! schema says, when the record is written).

use super::{ResourceState, StateFile};
use crate::secrets::{at_path, Redactor};

impl StateFile {
    /// Teaches `redactor` the values at every sensitive path of every resource (and deposed
    /// object).
    pub(crate) fn teach_secrets(&self, redactor: &Redactor) {
        self.iter().for_each(|r| r.teach_secrets(redactor));
    }
}

impl ResourceState {
    /// Teaches `redactor` the values at every sensitive path of this resource (and its deposed
    /// objects).
    pub(crate) fn teach_secrets(&self, redactor: &Redactor) {
        let trees =
            std::iter::once(&self.attributes).chain(self.deposed.iter().map(|d| &d.attributes));
        for attrs in trees {
            for path in &self.sensitive_paths {
                if let Some(v) = at_path(attrs, path) {
                    redactor.remember_json(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::state::{Change, ResourceKind};

    #[test]
    fn state_secrets_are_remembered_by_path_and_nothing_else() {
        let redactor = Redactor::new();
        let mut state = StateFile::empty();
        let mut r = ResourceState::new(
            "a.b.c",
            ResourceKind::Managed,
            "a",
            "a",
            "b",
            json!({"id": "state-public-id", "creds": {"password": "state-pass-123"}, "list": ["l0", "state-list-secret"]}),
        );
        r.sensitive_paths = vec![json!(["creds", "password"]), json!(["list", 1])];
        state.apply(&Change::Put(r));
        state.teach_secrets(&redactor);
        assert_eq!(
            redactor.redact("state-pass-123 state-list-secret state-public-id"),
            "(sensitive value) (sensitive value) state-public-id"
        );
    }
}
