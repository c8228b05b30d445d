//! The state's own keys: random secrets made once per state and kept only in it (the 0600
//! local file, or the S3 object), which what the state signs or digests elsewhere is keyed
//! with (DESIGN §93).
//!
//! - `savedPlan`: the HMAC key of a saved plan's sensitive-variable digests. It is random,
//!   never derived from the state's other contents: a plan file that leaks gives nothing to
//!   guess a weak password against, even to someone who can rebuild every other field of the
//!   state (issue 47: a key derived from the state was rebuilt and `winter2026` found in six
//!   guesses).
//! - `audit`: the MAC key of the audit log's records (`audit`): whoever can write the log but
//!   not read the state cannot forge or rewrite a record.
//!
//! The keys sit in the snapshot's top-level `keys` object (a field added within format version
//! 3, kept by older releases as an unknown field): `{"savedPlan": "<64 hex>", "audit": "<64 hex>"}`. They are
//! made when a snapshot is written without them ([`StateFile::make_keys`], called by each store's
//! compaction), so a read-only run never invents one that no file holds.
//!
//! Not: what the keys are used for (the engine's saved plans), where the state is stored
//! (the stores).

use serde_json::{Map, Value};

use super::StateFile;

/// The top-level field holding the keys.
const FIELD: &str = "keys";

/// One key the state keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateKey {
    /// Keys the digests of a saved plan's sensitive variables.
    SavedPlan,
    /// Keys the MAC of each audit record (`audit`).
    Audit,
}

impl StateKey {
    const ALL: [StateKey; 2] = [StateKey::SavedPlan, StateKey::Audit];

    fn name(self) -> &'static str {
        match self {
            StateKey::SavedPlan => "savedPlan",
            StateKey::Audit => "audit",
        }
    }
}

impl StateFile {
    /// The key `which`, when the state holds one (a state last written before keys existed, or
    /// never written, holds none).
    pub(crate) fn key(&self, which: StateKey) -> Option<[u8; 32]> {
        let text = self.extra.get(FIELD)?.get(which.name())?.as_str()?;
        let bytes = hex::decode(text).ok()?;
        bytes.try_into().ok()
    }

    /// Takes the keys of `current` (the state this one replaces: `state push`), which the
    /// place's audit log and saved plans were made with; keys of its own are dropped.
    pub(crate) fn keep_keys_of(&mut self, current: &StateFile) {
        if let Some(keys) = current.extra.get(FIELD) {
            self.extra.insert(FIELD.to_string(), keys.clone());
        }
    }

    /// Adds every key the state lacks, each 256 bits from the operating system's randomness;
    /// those it holds are kept. Called before a snapshot is written.
    pub(crate) fn make_keys(&mut self) {
        if StateKey::ALL.iter().all(|k| self.key(*k).is_some()) {
            return;
        }
        let keys = self
            .extra
            .entry(FIELD.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !keys.is_object() {
            // Damage (or another release's shape): replaced, since no key in it is usable.
            *keys = Value::Object(Map::new());
        }
        let Value::Object(keys) = keys else {
            unreachable!("made an object above")
        };
        for which in StateKey::ALL {
            let usable = keys
                .get(which.name())
                .and_then(Value::as_str)
                .and_then(|t| hex::decode(t).ok())
                .is_some_and(|b| b.len() == 32);
            if !usable {
                keys.insert(which.name().to_string(), Value::String(random_key()));
            }
        }
    }
}

/// The key `which` of the snapshot `reader` reads, without building the state: every other
/// field is skipped as it is parsed (a large state costs a scan, not a tree).
pub(crate) fn key_in_snapshot(reader: impl std::io::Read, which: StateKey) -> Option<[u8; 32]> {
    #[derive(serde::Deserialize)]
    struct KeysOnly {
        #[serde(default)]
        keys: Option<Map<String, Value>>,
    }
    let only: KeysOnly = serde_json::from_reader(reader).ok()?;
    let text = only.keys?.get(which.name())?.as_str()?.to_string();
    hex::decode(text).ok()?.try_into().ok()
}

/// 256 random bits, hex-encoded.
fn random_key() -> String {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the operating system's random-number generator answers");
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_made_once_random_and_kept() {
        let mut state = StateFile::with_lineage("l");
        assert_eq!(state.key(StateKey::SavedPlan), None, "none until written");
        state.make_keys();
        let key = state.key(StateKey::SavedPlan).expect("made");
        state.make_keys();
        assert_eq!(state.key(StateKey::SavedPlan), Some(key), "kept");
        let mut other = StateFile::with_lineage("l");
        other.make_keys();
        assert_ne!(
            other.key(StateKey::SavedPlan),
            Some(key),
            "random per state"
        );
        // Survives a round trip through the snapshot's JSON.
        let json = serde_json::to_value(&state).unwrap();
        let Value::Object(map) = json else { panic!() };
        let back = StateFile::try_from(map).unwrap();
        assert_eq!(back.key(StateKey::SavedPlan), Some(key));
        // And read alone from the snapshot's bytes.
        let bytes = serde_json::to_vec_pretty(&state).unwrap();
        assert_eq!(key_in_snapshot(&bytes[..], StateKey::SavedPlan), Some(key));
        assert_eq!(
            key_in_snapshot(&bytes[..], StateKey::Audit),
            state.key(StateKey::Audit)
        );
    }

    #[test]
    fn a_damaged_key_is_replaced() {
        let mut state = StateFile::with_lineage("l");
        state
            .extra
            .insert(FIELD.into(), serde_json::json!({"savedPlan": "00ff"}));
        assert_eq!(state.key(StateKey::SavedPlan), None);
        state.make_keys();
        assert!(state.key(StateKey::SavedPlan).is_some());
    }
}
