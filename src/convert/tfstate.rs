//! Reading a Terraform/OpenTofu state file (format version 4) into typed records.
//!
//! Owns: the state's JSON shape as Terraform 0.12 and later and OpenTofu write it, and the
//! refusal of any other format version. Every object keeps what Nivis must carry over exactly:
//! attributes (numbers as written), private bytes, schema version, dependencies, sensitive
//! paths, taint and deposed objects. Not: mapping addresses to Nivis ids (`address`), nor
//! writing the Nivis state (`record`). The file is only read.

use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{Map, Value};

/// The one state format version this reader takes.
pub(crate) const FORMAT_VERSION: u64 = 4;

/// A Terraform state: its managed and data resources.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TfState {
    /// The Terraform or OpenTofu version that wrote it (for messages).
    pub(crate) terraform_version: String,
    /// Every resource block's recorded instances.
    pub(crate) resources: Vec<TfResource>,
}

/// Whether a resource is managed or a data source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mode {
    /// `resource` blocks.
    Managed,
    /// `data` blocks (never recorded by convert).
    Data,
}

/// One step of a module instance path: `module.NAME`, or `module.NAME[KEY]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ModuleStep {
    /// The module call's name.
    pub(crate) name: String,
    /// The instance key of a module called with count or for_each.
    pub(crate) key: Option<IndexKey>,
}

/// An instance key: count's index or for_each's key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum IndexKey {
    /// `[1]`.
    Int(u64),
    /// `["web"]`.
    Str(String),
}

impl std::fmt::Display for IndexKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IndexKey::Int(i) => write!(f, "[{i}]"),
            IndexKey::Str(s) => write!(f, "[{}]", Value::String(s.clone())),
        }
    }
}

/// Which provider configuration manages a resource: `provider["SOURCE"]` or
/// `provider["SOURCE"].ALIAS`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ProviderRef {
    /// The provider's source address, e.g. `registry.terraform.io/hashicorp/null`.
    pub(crate) source: String,
    /// The configuration's alias, if any.
    pub(crate) alias: Option<String>,
}

/// A resource block's recorded instances.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TfResource {
    /// The module instance path (empty: the root module).
    pub(crate) module: Vec<ModuleStep>,
    /// Managed or data.
    pub(crate) mode: Mode,
    /// The resource type, e.g. `null_resource`.
    pub(crate) type_name: String,
    /// The block's name.
    pub(crate) name: String,
    /// Its provider configuration.
    pub(crate) provider: ProviderRef,
    /// The recorded objects.
    pub(crate) instances: Vec<TfInstance>,
}

/// One recorded object (a current one, or a deposed one when `deposed` is set).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TfInstance {
    /// count's index or for_each's key (none for a single instance).
    pub(crate) key: Option<IndexKey>,
    /// The resource schema version of `attributes`.
    pub(crate) schema_version: i64,
    /// The attributes as recorded.
    pub(crate) attributes: Value,
    /// The provider's private bytes.
    pub(crate) private: Option<Vec<u8>>,
    /// Resource addresses this object depended on (Terraform's spelling).
    pub(crate) dependencies: Vec<String>,
    /// Sensitive attribute paths, each a JSON array of keys and indices.
    pub(crate) sensitive_paths: Vec<Value>,
    /// `create_before_destroy` as recorded.
    pub(crate) create_before_destroy: bool,
    /// Recorded as tainted.
    pub(crate) tainted: bool,
    /// The deposed key of an old object kept by a create-before-destroy replacement.
    pub(crate) deposed: Option<String>,
}

impl TfResource {
    /// The resource's address without instance key, as Terraform prints it.
    pub(crate) fn address(&self) -> String {
        let mut out = module_prefix(&self.module);
        if self.mode == Mode::Data {
            out.push_str("data.");
        }
        out.push_str(&format!("{}.{}", self.type_name, self.name));
        out
    }

    /// One instance's address, as Terraform prints it.
    pub(crate) fn instance_address(&self, key: Option<&IndexKey>) -> String {
        match key {
            Some(k) => format!("{}{k}", self.address()),
            None => self.address(),
        }
    }
}

/// `module.a[0].module.b.` (empty for the root module).
pub(crate) fn module_prefix(module: &[ModuleStep]) -> String {
    let mut out = String::new();
    for step in module {
        out.push_str("module.");
        out.push_str(&step.name);
        if let Some(k) = &step.key {
            out.push_str(&k.to_string());
        }
        out.push('.');
    }
    out
}

/// Reads and parses the state file at `path`.
pub(crate) fn read(path: &Path) -> Result<TfState, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read the Terraform state {}: {e}", path.display()))?;
    parse(&bytes).map_err(|e| format!("Terraform state {}: {e}", path.display()))
}

/// Parses a state file's bytes.
pub(crate) fn parse(bytes: &[u8]) -> Result<TfState, String> {
    let doc: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not a JSON state file: {e}"))?;
    let Value::Object(top) = doc else {
        return Err("not a state file: the top level is not a JSON object".into());
    };
    match top.get("version").and_then(Value::as_u64) {
        Some(FORMAT_VERSION) => {}
        Some(other) => {
            return Err(format!(
                "state format version {other}; convert reads version {FORMAT_VERSION} (Terraform \
                 0.12 and later, OpenTofu). Upgrade the state first: run `terraform apply` or \
                 `terraform refresh` with Terraform 0.12 or newer, then convert again"
            ))
        }
        None => return Err("no format `version`: not a Terraform state file".into()),
    }
    let terraform_version = top
        .get("terraform_version")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    let resources = match top.get("resources") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, r)| resource(r).map_err(|e| format!("resources[{i}]: {e}")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`resources` is not a list".into()),
    };
    Ok(TfState {
        terraform_version,
        resources,
    })
}

fn text(object: &Map<String, Value>, field: &str) -> Result<String, String> {
    object
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("missing text field `{field}`"))
}

fn resource(value: &Value) -> Result<TfResource, String> {
    let r = value.as_object().ok_or("not an object")?;
    let mode = match text(r, "mode")?.as_str() {
        "managed" => Mode::Managed,
        "data" => Mode::Data,
        other => return Err(format!("unknown mode {other:?}")),
    };
    let module = match r.get("module").and_then(Value::as_str) {
        Some(path) => parse_module_path(path)?,
        None => Vec::new(),
    };
    let mut resource = TfResource {
        module,
        mode,
        type_name: text(r, "type")?,
        name: text(r, "name")?,
        provider: parse_provider(&text(r, "provider")?)?,
        instances: Vec::new(),
    };
    let address = resource.address();
    let instances = r
        .get("instances")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{address}: missing `instances`"))?;
    for (i, v) in instances.iter().enumerate() {
        let inst = instance(v).map_err(|e| format!("{address}: instances[{i}]: {e}"))?;
        resource.instances.push(inst);
    }
    Ok(resource)
}

fn instance(value: &Value) -> Result<TfInstance, String> {
    let o = value.as_object().ok_or("not an object")?;
    let key = match o.get("index_key") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(IndexKey::Str(s.clone())),
        Some(v) => Some(IndexKey::Int(v.as_u64().ok_or_else(|| {
            format!("index_key {v} is neither a string nor an index")
        })?)),
    };
    let attributes = match (o.get("attributes"), o.get("attributes_flat")) {
        (Some(a @ Value::Object(_)), _) => a.clone(),
        (_, Some(_)) => return Err(
            "only flat (pre-0.12) attributes are recorded: run `terraform apply -refresh-only` \
                 (or `terraform refresh`) with Terraform 0.12 or newer so the provider rewrites \
                 them, then convert again"
                .into(),
        ),
        _ => return Err("missing `attributes`".into()),
    };
    let private = match o.get("private") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            STANDARD
                .decode(s)
                .map_err(|e| format!("`private` is not base64: {e}"))?,
        ),
        Some(_) => return Err("`private` is not base64 text".into()),
    };
    let dependencies = match o.get("dependencies") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(d)) => d
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or("a dependency is not text")
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`dependencies` is not a list".into()),
    };
    let sensitive_paths = match o.get("sensitive_attributes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(paths)) => paths.iter().map(sensitive_path).collect::<Result<_, _>>()?,
        Some(_) => return Err("`sensitive_attributes` is not a list".into()),
    };
    Ok(TfInstance {
        key,
        schema_version: o.get("schema_version").and_then(Value::as_i64).unwrap_or(0),
        attributes,
        private,
        dependencies,
        sensitive_paths,
        create_before_destroy: o
            .get("create_before_destroy")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        tainted: o.get("status").and_then(Value::as_str) == Some("tainted"),
        deposed: o.get("deposed").and_then(Value::as_str).map(str::to_string),
    })
}

/// A cty path (`[{"type": "get_attr", "value": "x"}, {"type": "index", "value": {...}}]`) as
/// Nivis writes sensitive paths: a JSON array of attribute names and list indices.
fn sensitive_path(path: &Value) -> Result<Value, String> {
    let steps = path
        .as_array()
        .ok_or("a sensitive attribute path is not a list")?;
    let mut out = Vec::new();
    for step in steps {
        let kind = step.get("type").and_then(Value::as_str);
        let value = step.get("value");
        let converted = match (kind, value) {
            (Some("get_attr"), Some(Value::String(s))) => Value::String(s.clone()),
            (Some("index"), Some(v)) => match v.get("value").unwrap_or(v) {
                Value::String(s) => Value::String(s.clone()),
                n if n.as_u64().is_some() => n.clone(),
                other => {
                    return Err(format!(
                        "sensitive path index {other} is not a key or index"
                    ))
                }
            },
            _ => {
                return Err(format!(
                    "sensitive path step {step} is not one convert reads"
                ))
            }
        };
        out.push(converted);
    }
    Ok(Value::Array(out))
}

/// `provider["registry.terraform.io/hashicorp/null"]`, optionally `.ALIAS` after it, and in
/// older states a `module.x.` prefix (where the provider was configured).
pub(crate) fn parse_provider(text: &str) -> Result<ProviderRef, String> {
    let bad = || {
        format!(
            "provider {text:?} is not `provider[\"HOST/NAMESPACE/TYPE\"]`; states written before \
             Terraform 0.13 need `terraform 0.13upgrade` and an apply first"
        )
    };
    let start = text.find("provider[\"").ok_or_else(bad)? + "provider[\"".len();
    let rest = &text[start..];
    let end = rest.find("\"]").ok_or_else(bad)?;
    let source = rest[..end].to_string();
    let alias = match &rest[end + 2..] {
        "" => None,
        tail => Some(tail.strip_prefix('.').ok_or_else(bad)?.to_string()),
    };
    if source.split('/').count() != 3 {
        return Err(bad());
    }
    Ok(ProviderRef { source, alias })
}

/// `module.a[0].module.b["x"]` as its steps.
pub(crate) fn parse_module_path(path: &str) -> Result<Vec<ModuleStep>, String> {
    let mut steps = Vec::new();
    let mut rest = path;
    let bad = || format!("module path {path:?} is not `module.NAME[KEY]...`");
    while !rest.is_empty() {
        rest = rest.strip_prefix("module.").ok_or_else(bad)?;
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let name = rest[..end].to_string();
        rest = &rest[end..];
        let key = if let Some(after) = rest.strip_prefix('[') {
            let close = if after.starts_with('"') {
                // A quoted key: find the closing quote that is not escaped.
                let mut escaped = false;
                let mut close = None;
                for (i, c) in after.char_indices().skip(1) {
                    match c {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => {
                            close = Some(i);
                            break;
                        }
                        _ => escaped = false,
                    }
                }
                close.ok_or_else(bad)? + 1
            } else {
                after.find(']').ok_or_else(bad)?
            };
            let inside = &after[..close];
            rest = after[close..].strip_prefix(']').ok_or_else(bad)?;
            Some(if inside.starts_with('"') {
                IndexKey::Str(serde_json::from_str(inside).map_err(|_| bad())?)
            } else {
                IndexKey::Int(inside.parse().map_err(|_| bad())?)
            })
        } else {
            None
        };
        rest = rest.strip_prefix('.').unwrap_or(rest);
        if name.is_empty() {
            return Err(bad());
        }
        steps.push(ModuleStep { name, key });
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_version_4_state() {
        let state = parse(
            br#"{"version": 4, "terraform_version": "1.0.3", "serial": 3, "lineage": "x",
                "resources": [
                  {"mode": "managed", "type": "null_resource", "name": "node", "each": "list",
                   "provider": "provider[\"registry.terraform.io/hashicorp/null\"]",
                   "instances": [{"index_key": 1, "schema_version": 2,
                      "attributes": {"id": "12", "n": 1.50},
                      "private": "bnVsbA==", "dependencies": ["null_resource.a"],
                      "sensitive_attributes": [[{"type": "get_attr", "value": "triggers"},
                                                {"type": "index", "value": {"value": "k", "type": "string"}}]],
                      "status": "tainted", "create_before_destroy": true}]},
                  {"module": "module.app[\"x\"].module.b", "mode": "data", "type": "null_data_source",
                   "name": "d", "provider": "provider[\"registry.terraform.io/hashicorp/null\"].two",
                   "instances": [{"schema_version": 0, "attributes": {}}]}]}"#,
        )
        .unwrap();
        let node = &state.resources[0];
        assert_eq!(
            node.instance_address(node.instances[0].key.as_ref()),
            "null_resource.node[1]"
        );
        let i = &node.instances[0];
        assert_eq!(i.schema_version, 2);
        assert_eq!(i.private.as_deref(), Some(&b"null"[..]));
        assert_eq!(
            i.attributes["n"].to_string(),
            "1.50",
            "numbers stay as written"
        );
        assert!(i.tainted && i.create_before_destroy);
        assert_eq!(
            i.sensitive_paths,
            vec![serde_json::json!(["triggers", "k"])]
        );
        let d = &state.resources[1];
        assert_eq!(
            d.address(),
            "module.app[\"x\"].module.b.data.null_data_source.d"
        );
        assert_eq!(d.provider.alias.as_deref(), Some("two"));
    }

    #[test]
    fn refuses_other_format_versions_and_flat_attributes() {
        let v3 = parse(br#"{"version": 3, "modules": []}"#).unwrap_err();
        assert!(v3.contains("version 3") && v3.contains("version 4"), "{v3}");
        let flat = parse(
            br#"{"version": 4, "resources": [{"mode": "managed", "type": "t_r", "name": "n",
                "provider": "provider[\"registry.terraform.io/h/t\"]",
                "instances": [{"attributes_flat": {"id": "1"}}]}]}"#,
        )
        .unwrap_err();
        assert!(flat.contains("t_r.n") && flat.contains("flat"), "{flat}");
        assert!(parse(b"[]").is_err());
        assert!(parse_provider("null").is_err());
    }
}
