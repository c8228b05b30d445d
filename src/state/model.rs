//! The state model: what Nivis remembers about each resource, as plain serde types.
//!
//! These types are the on-disk format (see the module doc of [`crate::state`] for the JSON shape),
//! so fields are public data and every change to them is a format change. Unknown fields are
//! rejected on read: a field this build does not know would otherwise be dropped silently by the
//! next rewrite.

use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the state format this build reads and writes (`schema_version` in the file).
pub const SCHEMA_VERSION: u32 = 1;

/// Everything recorded about one state: the resources, plus the identity of the state itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    /// Format version; always [`SCHEMA_VERSION`] for a state this build produced.
    pub schema_version: u32,
    /// Incremented each time a full snapshot is written (compaction), never decreased.
    pub serial: u64,
    /// Unique id given to a state when it is first created and kept for its whole life; a journal
    /// or snapshot with another lineage belongs to a different state.
    pub lineage: String,
    /// Resources by id (the IR resource id); each value's `id` equals its key.
    pub resources: BTreeMap<String, ResourceState>,
}

impl StateFile {
    /// An empty state with a fresh, unique lineage and serial 0.
    pub fn empty() -> StateFile {
        StateFile::with_lineage(new_lineage())
    }

    /// An empty state with the given lineage and serial 0.
    pub fn with_lineage(lineage: impl Into<String>) -> StateFile {
        StateFile {
            schema_version: SCHEMA_VERSION,
            serial: 0,
            lineage: lineage.into(),
            resources: BTreeMap::new(),
        }
    }

    /// The resource recorded under `id`, if any.
    pub fn get(&self, id: &str) -> Option<&ResourceState> {
        self.resources.get(id)
    }

    /// Whether a resource is recorded under `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.resources.contains_key(id)
    }

    /// The recorded resources, ordered by id.
    pub fn iter(&self) -> impl Iterator<Item = &ResourceState> {
        self.resources.values()
    }

    /// The recorded ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.resources.keys().map(String::as_str)
    }

    /// Number of recorded resources.
    pub fn len(&self) -> usize {
        self.resources.len()
    }

    /// Whether no resource is recorded.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    /// Applies one change in memory: `Put` inserts or replaces, `Remove` of an absent id does
    /// nothing. Costs O(size of the change + log n).
    pub fn apply(&mut self, change: &Change) {
        match change {
            Change::Put(resource) => {
                self.resources.insert(resource.id.clone(), resource.clone());
            }
            Change::Remove(id) => {
                self.resources.remove(id);
            }
        }
    }
}

/// Whether a resource is managed (created, updated, destroyed) or a data source (only read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// A managed resource.
    Managed,
    /// A data source.
    Data,
}

/// Health of a resource's current object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceStatus {
    /// Created or updated successfully.
    Ready,
    /// Created but something failed afterwards: the next plan replaces it.
    Tainted,
}

/// The recorded object of one resource, as the provider last returned it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceState {
    /// Resource id in the IR; also the key in [`StateFile::resources`].
    pub id: String,
    /// Managed resource or data source.
    pub kind: ResourceKind,
    /// Id of the provider configuration in the IR that manages this resource.
    pub provider: String,
    /// Provider source address, e.g. `registry.terraform.io/hashicorp/null`.
    pub provider_source: String,
    /// Provider type name, e.g. `null_resource`.
    pub type_name: String,
    /// Version of the provider's resource schema these attributes follow (for upgrades).
    pub schema_version: i64,
    /// Attribute values as JSON, exactly as the provider returned them.
    pub attributes: Value,
    /// The provider's opaque private bytes; base64 text (or `null`) in the file.
    #[serde(with = "private_bytes")]
    pub private: Option<Vec<u8>>,
    /// Ids this resource depended on when it was last applied (destroy order).
    pub dependencies: Vec<String>,
    /// Attribute paths marked sensitive; each is a JSON array of keys and indices.
    pub sensitive_paths: Vec<Value>,
    /// Ready or tainted.
    pub status: ResourceStatus,
    /// Whether a replacement creates the new object before destroying the old one.
    pub create_before_destroy: bool,
    /// Old objects kept by a create-before-destroy replacement until they are destroyed.
    pub deposed: Vec<DeposedObject>,
}

impl ResourceState {
    /// A ready resource with the given identity and attributes and everything else empty
    /// (schema version 0, no private bytes, no dependencies, nothing sensitive, nothing deposed).
    pub fn new(
        id: impl Into<String>,
        kind: ResourceKind,
        provider: impl Into<String>,
        provider_source: impl Into<String>,
        type_name: impl Into<String>,
        attributes: Value,
    ) -> ResourceState {
        ResourceState {
            id: id.into(),
            kind,
            provider: provider.into(),
            provider_source: provider_source.into(),
            type_name: type_name.into(),
            schema_version: 0,
            attributes,
            private: None,
            dependencies: Vec::new(),
            sensitive_paths: Vec::new(),
            status: ResourceStatus::Ready,
            create_before_destroy: false,
            deposed: Vec::new(),
        }
    }

    /// Whether this is a managed resource (not a data source).
    pub fn is_managed(&self) -> bool {
        self.kind == ResourceKind::Managed
    }

    /// Whether the current object is tainted.
    pub fn is_tainted(&self) -> bool {
        self.status == ResourceStatus::Tainted
    }

    /// The deposed object with this key, if any.
    pub fn deposed_object(&self, key: &str) -> Option<&DeposedObject> {
        self.deposed.iter().find(|d| d.key == key)
    }
}

/// An old object of a resource, kept after a create-before-destroy replacement until destroyed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeposedObject {
    /// Key distinguishing deposed objects of the same resource.
    pub key: String,
    /// Attribute values as JSON.
    pub attributes: Value,
    /// The provider's private bytes; base64 text (or `null`) in the file.
    #[serde(with = "private_bytes")]
    pub private: Option<Vec<u8>>,
    /// Version of the resource schema these attributes follow.
    pub schema_version: i64,
}

/// One change to a state; a store commits a batch of them at once.
// Changes live briefly in small batches: boxing `Put` would cost an allocation per resource.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Insert or replace the resource under its id.
    Put(ResourceState),
    /// Forget the resource with this id (nothing happens if it is absent).
    Remove(String),
}

impl Change {
    /// The resource id this change touches.
    pub fn id(&self) -> &str {
        match self {
            Change::Put(resource) => &resource.id,
            Change::Remove(id) => id,
        }
    }
}

/// A new lineage: 128 bits formatted like a UUID (`8-4-4-4-12` hex digits).
///
/// Made without a random-number crate: the wall clock in nanoseconds, the process id and a
/// process-wide counter are hashed with two std `RandomState` hashers, whose SipHash keys the
/// standard library seeds from the operating system's randomness.
pub(crate) fn new_lineage() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let word = |salt: u8| RandomState::new().hash_one((salt, nanos, std::process::id(), count));
    let hex = format!("{:016x}{:016x}", word(0), word(1));
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Serde adapter: `Option<Vec<u8>>` as a base64 string or `null`.
mod private_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        bytes: &Option<Vec<u8>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => serializer.serialize_some(&super::super::base64::encode(bytes)),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        match Option::<String>::deserialize(deserializer)? {
            Some(text) => super::super::base64::decode(&text)
                .map(Some)
                .map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> ResourceState {
        let mut r = ResourceState::new(
            "web",
            ResourceKind::Managed,
            "null",
            "registry.terraform.io/hashicorp/null",
            "null_resource",
            json!({"id": "123", "triggers": {"a": "1"}, "big": 12345678901234567890123u128}),
        );
        r.private = Some(vec![0, 1, 2, 0xff]);
        r.sensitive_paths = vec![json!(["triggers", "a"])];
        r.status = ResourceStatus::Tainted;
        r.deposed = vec![DeposedObject {
            key: "00000001".into(),
            attributes: json!({"id": "old"}),
            private: None,
            schema_version: 1,
        }];
        r
    }

    #[test]
    fn json_shape_is_snake_case_with_base64_private() {
        let v = serde_json::to_value(sample()).unwrap();
        assert_eq!(v["kind"], "managed");
        assert_eq!(v["status"], "tainted");
        assert_eq!(v["type_name"], "null_resource");
        assert_eq!(v["provider_source"], "registry.terraform.io/hashicorp/null");
        assert_eq!(v["private"], "AAEC/w==");
        assert_eq!(v["create_before_destroy"], false);
        assert_eq!(v["deposed"][0]["private"], Value::Null);
        let change = serde_json::to_value(Change::Remove("web".into())).unwrap();
        assert_eq!(change, json!({"remove": "web"}));
        assert!(serde_json::to_value(Change::Put(sample())).unwrap()["put"].is_object());
    }

    #[test]
    fn round_trips_and_keeps_big_numbers_exact() {
        let mut state = StateFile::empty();
        state.apply(&Change::Put(sample()));
        let text = serde_json::to_string(&state).unwrap();
        assert!(text.contains("12345678901234567890123"));
        let back: StateFile = serde_json::from_str(&text).unwrap();
        assert_eq!(back, state);
    }

    #[test]
    fn rejects_unknown_fields_and_bad_base64() {
        let mut v = serde_json::to_value(sample()).unwrap();
        v["private"] = json!("not base64!");
        assert!(serde_json::from_value::<ResourceState>(v.clone()).is_err());
        v["private"] = Value::Null;
        assert!(serde_json::from_value::<ResourceState>(v.clone()).is_ok());
        v["surprise"] = json!(1);
        assert!(serde_json::from_value::<ResourceState>(v).is_err());
    }

    #[test]
    fn apply_puts_replaces_and_removes() {
        let mut state = StateFile::with_lineage("l");
        let r = sample();
        state.apply(&Change::Put(r.clone()));
        assert_eq!(state.get("web"), Some(&r));
        state.apply(&Change::Remove("absent".into()));
        assert_eq!(state.len(), 1);
        state.apply(&Change::Remove("web".into()));
        assert!(state.is_empty());
    }

    #[test]
    fn lineages_are_unique_and_uuid_shaped() {
        let a = new_lineage();
        let b = new_lineage();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
    }
}
