//! The state model: what Nivis remembers about each resource, as plain serde types.
//!
//! These types are the on-disk format (see the module doc of [`crate::state`] for the JSON shape),
//! so fields are public data and every change to them is a format change. The format follows the
//! versioning rule of versioned artifacts: `schemaVersion` names the format's major version;
//! within it, fields may be added, and a field this build does not know is kept (in `extra`) and
//! written back unchanged, never dropped; a newer major version is refused. Reading takes each
//! object apart by hand ([`Fields`]) because serde's `flatten` loses exact numbers. Keys are
//! camelCase, as in the IR, the ledger, `--json` and saved plans; versions 1 and 2 spelled the
//! resource keys in snake_case and are renamed on read ([`upgrade_resource`]).

use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub(crate) use super::change::Change;
use super::pending::PendingOperation;

/// Major version of the state format this build writes (`schemaVersion` in the file). It also
/// reads version 2, which spelled the resource keys in snake_case (`type_name`, ...), and
/// version 1, written by the first release as `schema_version`, which differs from 2 only in
/// that key (and in rejecting unknown fields).
pub(crate) const SCHEMA_VERSION: u32 = 3;

/// The keys of a resource that versions 1 and 2 spelled in snake_case, with their names since
/// version 3. Any other key (known, or unknown and kept in `extra`) is read as it is spelled.
const RENAMED_RESOURCE_KEYS: [(&str, &str); 5] = [
    ("provider_source", "providerSource"),
    ("type_name", "typeName"),
    ("schema_version", "schemaVersion"),
    ("sensitive_paths", "sensitivePaths"),
    ("create_before_destroy", "createBeforeDestroy"),
];

/// The keys of a deposed object that versions 1 and 2 spelled in snake_case.
const RENAMED_DEPOSED_KEYS: [(&str, &str); 1] = [("schema_version", "schemaVersion")];

/// Why a snapshot, a journal record, a resource or a deposed object is not one this build reads.
#[derive(Debug)]
pub enum FormatError {
    /// The version key holds something other than a whole number.
    BadVersion {
        /// `schemaVersion`, or the first release's `schema_version`.
        key: &'static str,
        /// What it holds.
        found: Value,
    },
    /// A version this build does not read (0, or newer than [`SCHEMA_VERSION`]).
    Unsupported {
        /// The version found.
        found: u64,
    },
    /// A required field is missing.
    Missing {
        /// The field.
        field: &'static str,
    },
    /// A field holds a value of the wrong shape.
    Field {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        source: serde_json::Error,
    },
    /// A version 1 state with keys it never had room for.
    UnknownInVersion1 {
        /// The keys.
        keys: Vec<String>,
    },
    /// A version 1 or 2 object spells one key both the old way and the new way.
    BothSpellings {
        /// The snake_case key.
        old: &'static str,
        /// The camelCase key.
        new: &'static str,
    },
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::BadVersion { key, found } => {
                write!(f, "{key} {found} is not a version number")
            }
            FormatError::Unsupported { found } => write!(
                f,
                "state format version {found} is not one this nivis reads (1 to \
                 {SCHEMA_VERSION})"
            ),
            FormatError::Missing { field } => write!(f, "missing field `{field}`"),
            FormatError::Field { field, source } => write!(f, "field `{field}`: {source}"),
            FormatError::UnknownInVersion1 { keys } => {
                write!(f, "unknown field(s) {keys:?} in a version 1 state")
            }
            FormatError::BothSpellings { old, new } => write!(
                f,
                "both `{old}` and `{new}` in a version 1 or 2 record: only one can be the \
                 field (version 3 renamed `{old}` to `{new}`)"
            ),
        }
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FormatError::Field { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Renames the snake_case keys of a version 1 or 2 resource object (and of its deposed
/// objects) to their version 3 names, in place; keys it does not know are left as they are
/// (kept in `extra`, written back as they were spelled). Anything that is not an object is left
/// for the parser to refuse.
pub(crate) fn upgrade_resource(resource: &mut Value) -> Result<(), FormatError> {
    let Some(object) = resource.as_object_mut() else {
        return Ok(());
    };
    rename_keys(object, &RENAMED_RESOURCE_KEYS)?;
    if let Some(Value::Array(deposed)) = object.get_mut("deposed") {
        for old in deposed.iter_mut().filter_map(Value::as_object_mut) {
            rename_keys(old, &RENAMED_DEPOSED_KEYS)?;
        }
    }
    Ok(())
}

/// [`upgrade_resource`] for the resource a version 1 or 2 journal change puts (if it puts one).
pub(crate) fn upgrade_change(change: &mut Value) -> Result<(), FormatError> {
    match change.get_mut("put") {
        Some(resource) => upgrade_resource(resource),
        None => Ok(()),
    }
}

fn rename_keys(
    object: &mut Map<String, Value>,
    renames: &[(&'static str, &'static str)],
) -> Result<(), FormatError> {
    for &(old, new) in renames {
        if let Some(value) = object.remove(old) {
            if object.contains_key(new) {
                return Err(FormatError::BothSpellings { old, new });
            }
            object.insert(new.to_string(), value);
        }
    }
    Ok(())
}

/// Everything recorded about one state: the resources, plus the identity of the state itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Map<String, Value>")]
pub struct StateFile {
    /// Format version; always [`SCHEMA_VERSION`] in memory (older files are migrated on read).
    #[serde(rename = "schemaVersion")]
    pub(crate) schema_version: u32,
    /// Incremented each time a full snapshot is written (compaction), never decreased.
    pub(crate) serial: u64,
    /// Unique id given to a state when it is first created and kept for its whole life; a journal
    /// or snapshot with another lineage belongs to a different state.
    pub lineage: String,
    /// Resources by id (the IR resource id); each value's `id` equals its key.
    pub resources: BTreeMap<String, ResourceState>,
    /// Operations sent to a provider whose result is not recorded, by address (DESIGN §97);
    /// `pendingOperations` in the file, absent when empty.
    #[serde(
        rename = "pendingOperations",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub(crate) pending: BTreeMap<String, PendingOperation>,
    /// Fields added by a newer release of this format version, kept as they were.
    #[serde(flatten)]
    pub(crate) extra: BTreeMap<String, Value>,
}

/// The format version a snapshot or journal record declares: `schemaVersion`, or version 1 for
/// the first release's `schema_version` (and for journal lines, which carried none).
pub(crate) fn declared_version(object: &Map<String, Value>) -> Result<u64, FormatError> {
    let number = |key: &'static str, v: &Value| {
        v.as_u64().ok_or_else(|| FormatError::BadVersion {
            key,
            found: v.clone(),
        })
    };
    match (object.get("schemaVersion"), object.get("schema_version")) {
        (Some(v), _) => number("schemaVersion", v),
        (None, Some(v)) => number("schema_version", v),
        (None, None) => Ok(1),
    }
}

impl TryFrom<Map<String, Value>> for StateFile {
    type Error = FormatError;

    fn try_from(mut map: Map<String, Value>) -> Result<StateFile, FormatError> {
        let version = declared_version(&map)?;
        if version > u64::from(SCHEMA_VERSION) || version == 0 {
            return Err(FormatError::Unsupported { found: version });
        }
        if version < 3 {
            if let Some(Value::Object(resources)) = map.get_mut("resources") {
                for resource in resources.values_mut() {
                    upgrade_resource(resource)?;
                }
            }
        }
        let mut f = Fields(map);
        f.0.remove("schemaVersion");
        let legacy = f.0.remove("schema_version").is_some();
        let state = StateFile {
            schema_version: SCHEMA_VERSION,
            serial: f.take("serial")?,
            lineage: f.take("lineage")?,
            resources: f.take("resources")?,
            pending: f.take_optional("pendingOperations")?.unwrap_or_default(),
            extra: f.rest(),
        };
        if legacy && !state.extra.is_empty() {
            // Version 1 had no room for additions: an unknown key there is damage.
            let keys = state.extra.keys().cloned().collect();
            return Err(FormatError::UnknownInVersion1 { keys });
        }
        Ok(state)
    }
}

/// A JSON object taken apart field by field; what is left over is kept as `extra`.
struct Fields(Map<String, Value>);

impl Fields {
    fn take<T: serde::de::DeserializeOwned>(
        &mut self,
        field: &'static str,
    ) -> Result<T, FormatError> {
        let value = self.0.remove(field).ok_or(FormatError::Missing { field })?;
        serde_json::from_value(value).map_err(|source| FormatError::Field { field, source })
    }

    /// A field kept as JSON: moved out as it is (decoding a JSON value into a JSON value
    /// would build an identical copy).
    fn take_json(&mut self, field: &'static str) -> Result<Value, FormatError> {
        self.0.remove(field).ok_or(FormatError::Missing { field })
    }

    /// A field older files lack: absent (or `null`) is `None`.
    fn take_optional<T: serde::de::DeserializeOwned>(
        &mut self,
        field: &'static str,
    ) -> Result<Option<T>, FormatError> {
        match self.0.remove(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => serde_json::from_value(value)
                .map(Some)
                .map_err(|source| FormatError::Field { field, source }),
        }
    }

    fn take_private(&mut self) -> Result<Option<Vec<u8>>, FormatError> {
        let field = "private";
        let value = self.0.remove(field).ok_or(FormatError::Missing { field })?;
        private_bytes::deserialize(value).map_err(|source| FormatError::Field { field, source })
    }

    fn rest(self) -> BTreeMap<String, Value> {
        self.0.into_iter().collect()
    }
}

impl StateFile {
    /// An empty state with a fresh, unique lineage and serial 0.
    pub fn empty() -> StateFile {
        StateFile::with_lineage(new_lineage())
    }

    /// An empty state with the given lineage and serial 0.
    pub(crate) fn with_lineage(lineage: impl Into<String>) -> StateFile {
        StateFile {
            schema_version: SCHEMA_VERSION,
            serial: 0,
            lineage: lineage.into(),
            resources: BTreeMap::new(),
            pending: BTreeMap::new(),
            extra: BTreeMap::new(),
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

    /// The changes that rebuild this state from an empty one: a put per record, then a note
    /// per pending operation (DESIGN §97), so a state saved whole (its directory or objects
    /// went mid-run) still says which objects may exist unrecorded.
    pub(crate) fn rebuilding_changes(&self) -> Vec<Change> {
        let records = self.resources.values().cloned().map(Change::Put);
        let notes = self.pending.values().cloned().map(Change::Intend);
        records.chain(notes).collect()
    }

    /// The changes that rename the record at `from` to `to` (a move: the real object stays as
    /// it is): the record under its new id, the old id removed, and every record that named
    /// `from` among its dependencies naming `to` instead. Empty when `from` is not recorded.
    pub(crate) fn rename(&self, from: &str, to: &str) -> Vec<Change> {
        let Some(record) = self.get(from) else {
            return Vec::new();
        };
        let mut moved = record.clone();
        moved.id = to.to_string();
        let mut changes = vec![Change::Remove(from.to_string()), Change::Put(moved)];
        for other in self.iter().filter(|r| r.id != from) {
            if other.dependencies.iter().any(|d| d == from) {
                let mut updated = other.clone();
                for d in &mut updated.dependencies {
                    if d == from {
                        *d = to.to_string();
                    }
                }
                changes.push(Change::Put(updated));
            }
        }
        changes
    }

    /// Applies one change in memory: `Put` inserts or replaces (and settles an operation
    /// pending on its id: the record is its result), `Remove` of an absent id does nothing (and
    /// settles nothing: a replace's create may follow it), `Intend` notes a pending operation,
    /// `Settle` forgets one. Costs O(size of the change + log n).
    pub(crate) fn apply(&mut self, change: &Change) {
        match change {
            Change::Put(resource) => {
                if !self.pending.is_empty() {
                    self.pending.remove(&resource.id);
                }
                self.resources.insert(resource.id.clone(), resource.clone());
            }
            Change::Remove(id) => {
                self.resources.remove(id);
            }
            Change::Intend(operation) => {
                self.pending
                    .insert(operation.address.clone(), operation.clone());
            }
            Change::Settle(id) => {
                self.pending.remove(id);
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
pub(crate) enum ResourceStatus {
    /// Created or updated successfully.
    Ready,
    /// Created but something failed afterwards: the next plan replaces it.
    Tainted,
}

/// The recorded object of one resource, as the provider last returned it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Map<String, Value>", rename_all = "camelCase")]
pub struct ResourceState {
    /// Resource id in the IR; also the key in [`StateFile::resources`].
    pub id: String,
    /// Managed resource or data source.
    pub(crate) kind: ResourceKind,
    /// Id of the provider configuration in the IR that manages this resource.
    pub(crate) provider: String,
    /// Provider source address, e.g. `registry.terraform.io/hashicorp/null`.
    pub(crate) provider_source: String,
    /// Provider type name, e.g. `null_resource`.
    pub(crate) type_name: String,
    /// Version of the provider's resource schema these attributes follow (for upgrades).
    pub(crate) schema_version: i64,
    /// Attribute values as JSON, exactly as the provider returned them.
    pub attributes: Value,
    /// The provider's opaque private bytes; base64 text (or `null`) in the file.
    #[serde(with = "private_bytes")]
    pub(crate) private: Option<Vec<u8>>,
    /// Ids this resource depended on when it was last applied (destroy order).
    pub(crate) dependencies: Vec<String>,
    /// Attribute paths marked sensitive; each is a JSON array of keys and indices.
    pub(crate) sensitive_paths: Vec<Value>,
    /// Ready or tainted.
    pub(crate) status: ResourceStatus,
    /// Whether a replacement creates the new object before destroying the old one.
    pub(crate) create_before_destroy: bool,
    /// Old objects kept by a create-before-destroy replacement until they are destroyed.
    pub deposed: Vec<DeposedObject>,
    /// The mark of the provider binary and schema whose own answer `attributes` are (absent:
    /// unknown, e.g. imported or written before marks existed). A record carrying the current
    /// provider's mark at its current schema version is decoded without `UpgradeResourceState`
    /// (DESIGN §79).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) written_by: Option<String>,
    /// `lifecycle.replaceTriggeredBy` outputs as they were when the object was last written:
    /// the trigger (`alpha.alpha_token.a.value`) to the SHA-256 of its value's JSON. Absent in
    /// records written without triggers (and before they existed): nothing to compare with
    /// (DESIGN §103).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) replace_triggers: BTreeMap<String, String>,
    /// Fields added by a newer release of this format version, kept as they were.
    #[serde(flatten)]
    pub(crate) extra: BTreeMap<String, Value>,
}

impl TryFrom<Map<String, Value>> for ResourceState {
    type Error = FormatError;

    fn try_from(map: Map<String, Value>) -> Result<ResourceState, FormatError> {
        let mut f = Fields(map);
        Ok(ResourceState {
            id: f.take("id")?,
            kind: f.take("kind")?,
            provider: f.take("provider")?,
            provider_source: f.take("providerSource")?,
            type_name: f.take("typeName")?,
            schema_version: f.take("schemaVersion")?,
            attributes: f.take_json("attributes")?,
            private: f.take_private()?,
            dependencies: f.take("dependencies")?,
            sensitive_paths: f.take("sensitivePaths")?,
            status: f.take("status")?,
            create_before_destroy: f.take("createBeforeDestroy")?,
            deposed: f.take("deposed")?,
            written_by: f.take_optional("writtenBy")?,
            replace_triggers: f.take_optional("replaceTriggers")?.unwrap_or_default(),
            extra: f.rest(),
        })
    }
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
            written_by: None,
            replace_triggers: BTreeMap::new(),
            extra: BTreeMap::new(),
        }
    }

    /// Whether this is a managed resource (not a data source).
    pub fn is_managed(&self) -> bool {
        self.kind == ResourceKind::Managed
    }

    /// Whether the current object is tainted.
    pub(crate) fn is_tainted(&self) -> bool {
        self.status == ResourceStatus::Tainted
    }
}

/// An old object of a resource, kept after a create-before-destroy replacement until destroyed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Map<String, Value>", rename_all = "camelCase")]
pub struct DeposedObject {
    /// Key distinguishing deposed objects of the same resource.
    pub(crate) key: String,
    /// Attribute values as JSON.
    pub attributes: Value,
    /// The provider's private bytes; base64 text (or `null`) in the file.
    #[serde(with = "private_bytes")]
    pub(crate) private: Option<Vec<u8>>,
    /// Version of the resource schema these attributes follow.
    pub(crate) schema_version: i64,
    /// Fields added by a newer release of this format version, kept as they were.
    #[serde(flatten)]
    pub(crate) extra: BTreeMap<String, Value>,
}

impl DeposedObject {
    /// A deposed object with nothing but what this build knows.
    pub(crate) fn new(
        key: impl Into<String>,
        attributes: Value,
        private: Option<Vec<u8>>,
        schema_version: i64,
    ) -> DeposedObject {
        DeposedObject {
            key: key.into(),
            attributes,
            private,
            schema_version,
            extra: BTreeMap::new(),
        }
    }
}

impl TryFrom<Map<String, Value>> for DeposedObject {
    type Error = FormatError;

    fn try_from(map: Map<String, Value>) -> Result<DeposedObject, FormatError> {
        let mut f = Fields(map);
        Ok(DeposedObject {
            key: f.take("key")?,
            attributes: f.take_json("attributes")?,
            private: f.take_private()?,
            schema_version: f.take("schemaVersion")?,
            extra: f.rest(),
        })
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
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        bytes: &Option<Vec<u8>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => serializer.serialize_some(&STANDARD.encode(bytes)),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        match Option::<String>::deserialize(deserializer)? {
            // Strict: padding required, no whitespace, no stray bits: one spelling per value.
            Some(text) => STANDARD
                .decode(&text)
                .map(Some)
                .map_err(|e| serde::de::Error::custom(format!("private: bad base64: {e}"))),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
