//! Reading a snapshot one resource at a time.
//!
//! Owns the fast path of `file::parse_snapshot`: a snapshot in the current format whose
//! `schemaVersion` comes before its `resources` (as this build writes them) is read straight
//! from its bytes, each resource decoded as a small JSON tree, turned into its
//! [`ResourceState`] and the tree dropped before the next one is read. Reading the whole
//! document as one tree first (the general reader) holds about three times the records' size at
//! once, and what it frees is interleaved with the records it keeps, so the allocator can hand
//! little of it back while Nix evaluates beside the state (DESIGN §84).
//!
//! Not here: any decision about what a snapshot means. Every resource goes through the same
//! `ResourceState::try_from` as in the general reader, and whatever this path does not take
//! (an older format, keys in another order, a repeated key, any error at all) makes it answer
//! `None`, so that the general reader reads the document and reports or migrates exactly as it
//! always did.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, MapAccess, Visitor};
use serde_json::Value;

use super::model::{declared_version, ResourceState, StateFile, SCHEMA_VERSION};

/// The snapshot in `bytes` read one resource at a time, or `None` when the general reader must
/// read it (see the module doc): never a different state than the general reader's.
pub(super) fn read_current(bytes: &[u8]) -> Option<StateFile> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let state = de.deserialize_map(SnapshotVisitor).ok()?;
    de.end().ok()?;
    Some(state)
}

/// The serial of the snapshot in `bytes`, read without its records (serde skips every other
/// key without building anything), or `None` when the general reader must say: no whole
/// number under `serial`, or a format version this build does not read (the version read as
/// every reader reads it, [`declared_version`]).
pub(super) fn serial_of(bytes: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "schemaVersion")]
        version: Option<Value>,
        /// The first release's spelling.
        schema_version: Option<Value>,
        serial: u64,
    }
    let head: Head = serde_json::from_slice(bytes).ok()?;
    let keys = [
        ("schemaVersion", head.version),
        ("schema_version", head.schema_version),
    ];
    let versions: serde_json::Map<String, Value> = (keys.into_iter())
        .filter_map(|(key, value)| Some((key.to_string(), value?)))
        .collect();
    let version = declared_version(&versions).ok()?;
    (1..=u64::from(SCHEMA_VERSION))
        .contains(&version)
        .then_some(head.serial)
}

/// Why the fast path hands a document to the general reader (never shown: the general reader
/// reports in its own words).
fn decline<E: de::Error>(why: &str) -> E {
    E::custom(why)
}

struct SnapshotVisitor;

impl<'de> Visitor<'de> for SnapshotVisitor {
    type Value = StateFile;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a state snapshot")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StateFile, A::Error> {
        let mut seen: Vec<String> = Vec::new();
        let mut current = false;
        let (mut serial, mut lineage, mut resources) = (None, None, None);
        let mut extra = BTreeMap::new();
        let mut pending = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(decline("a repeated key"));
            }
            seen.push(key.clone());
            match key.as_str() {
                "schemaVersion" => {
                    let version: Value = map.next_value()?;
                    if version.as_u64() != Some(u64::from(SCHEMA_VERSION)) {
                        return Err(decline("not the current format"));
                    }
                    current = true;
                }
                // The first release's spelling: migrated by the general reader.
                "schema_version" => return Err(decline("version 1")),
                "serial" => serial = Some(field::<u64, A::Error>(map.next_value()?)?),
                "lineage" => lineage = Some(field::<String, A::Error>(map.next_value()?)?),
                "resources" if current => resources = Some(map.next_value_seed(ResourcesSeed)?),
                "resources" => return Err(decline("resources before the version")),
                "pendingOperations" => {
                    let value: Option<_> = field::<_, A::Error>(map.next_value()?)?;
                    pending = value.unwrap_or_default();
                }
                _ => {
                    extra.insert(key, map.next_value::<Value>()?);
                }
            }
        }
        match (current, serial, lineage, resources) {
            (true, Some(serial), Some(lineage), Some(resources)) => Ok(StateFile {
                schema_version: SCHEMA_VERSION,
                serial,
                lineage,
                resources,
                pending,
                extra,
            }),
            _ => Err(decline("a field is missing")),
        }
    }
}

/// A top-level field decoded from its JSON value, as the general reader decodes it.
fn field<T: serde::de::DeserializeOwned, E: de::Error>(value: Value) -> Result<T, E> {
    serde_json::from_value(value).map_err(E::custom)
}

/// `resources`: each entry decoded, converted and its tree dropped before the next is read.
struct ResourcesSeed;

impl<'de> DeserializeSeed<'de> for ResourcesSeed {
    type Value = BTreeMap<String, ResourceState>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(ResourcesVisitor)
    }
}

struct ResourcesVisitor;

impl<'de> Visitor<'de> for ResourcesVisitor {
    type Value = BTreeMap<String, ResourceState>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("resources by id")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some((id, resource)) = map.next_entry::<String, Value>()? {
            let Value::Object(object) = resource else {
                return Err(decline("a resource that is not an object"));
            };
            let resource = ResourceState::try_from(object).map_err(de::Error::custom)?;
            // A repeated id: the later one wins, as in the general reader's JSON object.
            out.insert(id, resource);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::state::file::parse_whole_snapshot;
    use crate::state::{DeposedObject, ResourceKind};

    fn whole(bytes: &[u8]) -> Option<StateFile> {
        parse_whole_snapshot(Path::new("state.json"), bytes).ok()
    }

    fn sample() -> StateFile {
        let mut state = StateFile::with_lineage("6f1c0e2a-93b4-4c1d-8e5f-0a7b3c2d1e9f");
        state.serial = 7;
        state
            .extra
            .insert("addedLater".into(), json!({"k": [1, 2]}));
        for (id, n) in [("b", 2), ("a", 1)] {
            let mut r = ResourceState::new(
                id,
                ResourceKind::Managed,
                "null",
                "registry.terraform.io/hashicorp/null",
                "null_resource",
                json!({"id": n, "big": 12345678901234567890123u128, "f": 1.50, "nested": {"z": 1, "a": [null]}}),
            );
            r.private = Some(vec![0, 1, 0xff]);
            r.sensitive_paths = vec![json!(["nested", "z"])];
            r.deposed = vec![DeposedObject::new("00000001", json!({"id": 0}), None, 1)];
            r.written_by = Some("mark".into());
            r.extra.insert("futureField".into(), json!(true));
            state.resources.insert(id.into(), r);
        }
        state
    }

    #[test]
    fn what_this_build_writes_is_read_one_resource_at_a_time_to_the_same_state() {
        let state = sample();
        for bytes in [
            serde_json::to_vec_pretty(&state).unwrap(),
            serde_json::to_vec(&state).unwrap(),
        ] {
            assert_eq!(read_current(&bytes), Some(state.clone()));
            assert_eq!(whole(&bytes), Some(state.clone()));
        }
        let empty = StateFile::empty();
        let bytes = serde_json::to_vec(&empty).unwrap();
        assert_eq!(read_current(&bytes), Some(empty));
    }

    #[test]
    fn anything_else_is_left_to_the_general_reader_or_read_as_it_reads_it() {
        let written = serde_json::to_value(sample()).unwrap();
        let mut reordered = serde_json::Map::new();
        for key in ["resources", "lineage", "serial", "schemaVersion"] {
            reordered.insert(key.into(), written[key].clone());
        }
        let mut version_2 = written.clone();
        version_2["schemaVersion"] = json!(2);
        let resource = &mut version_2["resources"]["a"];
        let type_name = resource
            .as_object_mut()
            .unwrap()
            .remove("typeName")
            .unwrap();
        resource["type_name"] = type_name;
        let mut version_1 = version_2.clone();
        version_1.as_object_mut().unwrap().remove("schemaVersion");
        version_1["schema_version"] = json!(1);
        // Version 1 had no room for additions.
        version_1.as_object_mut().unwrap().remove("addedLater");
        let mut missing = written.clone();
        missing.as_object_mut().unwrap().remove("lineage");
        let mut bad_resource = written.clone();
        bad_resource["resources"]["a"]["kind"] = json!("other");
        let mut not_an_object = written.clone();
        not_an_object["resources"]["a"] = json!([1]);
        let mut bad_private = written.clone();
        bad_private["resources"]["b"]["private"] = json!("%%%");
        let mut newer = written.clone();
        newer["schemaVersion"] = json!(4);
        let text = serde_json::to_string(&written).unwrap();
        let repeated_key = text.replacen("{", "{\"serial\":1,", 1);
        let broken_then_whole = text.replacen("\"resources\":{", "\"resources\":{\"a\":{},", 1);
        let mut first = written["resources"]["a"].clone();
        first["attributes"] = json!({"id": "first"});
        let repeated_id = text.replacen(
            "\"resources\":{",
            &format!("\"resources\":{{\"a\":{first},"),
            1,
        );
        let documents: Vec<(Vec<u8>, bool)> = vec![
            (serde_json::to_vec(&reordered).unwrap(), false),
            (serde_json::to_vec(&version_2).unwrap(), false),
            (serde_json::to_vec(&version_1).unwrap(), false),
            (serde_json::to_vec(&missing).unwrap(), false),
            (serde_json::to_vec(&bad_resource).unwrap(), false),
            (serde_json::to_vec(&not_an_object).unwrap(), false),
            (serde_json::to_vec(&bad_private).unwrap(), false),
            (serde_json::to_vec(&newer).unwrap(), false),
            (repeated_key.into_bytes(), false),
            // A repeated id: the later record wins in both readers (and a broken earlier one
            // is no error in the general reader, which never looks at it).
            (repeated_id.into_bytes(), true),
            (broken_then_whole.clone().into_bytes(), false),
            (format!("{text} x").into_bytes(), false),
            (text.as_bytes()[..text.len() - 3].to_vec(), false),
            (b"[]".to_vec(), false),
        ];
        for (bytes, fast) in documents {
            let shown = String::from_utf8_lossy(&bytes).into_owned();
            match read_current(&bytes) {
                Some(state) => {
                    assert!(fast, "read one resource at a time: {shown}");
                    assert_eq!(Some(state), whole(&bytes), "{shown}");
                }
                None => assert!(!fast, "left to the general reader: {shown}"),
            }
        }
        // The general reader still migrates or reads what the fast path leaves to it.
        assert!(whole(broken_then_whole.as_bytes()).is_some());
        assert!(whole(&serde_json::to_vec(&version_1).unwrap()).is_some());
        assert!(whole(&serde_json::to_vec(&reordered).unwrap()).is_some());
    }
}
