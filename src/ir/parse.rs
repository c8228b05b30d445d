//! The structural layer: the rules of docs/ir-schema.json checked while the typed IR is built.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::{Map, Value};

use super::fields::Fields;
use super::model::{
    Build, DerivedInput, Ir, IrError, Lifecycle, Node, NodeKind, ProviderDecl, ProviderKind, Ref,
    Tree,
};
use super::path::{key, render_path, PathStep};
use super::references::{check_references, located};
use super::rules::{
    expansion_message, integer_value, is_data_id, is_derived_input, is_drv_path, is_ident,
    is_module_prefix, is_node_id, is_provider_id, no_match, not_of_type, py_str,
    BUILD_PATH_PATTERN, DATA_ID_PATTERN, DERIVED_INPUT_PATTERN, DRV_PATH_PATTERN, IDENT_PATTERN,
    KIND_MESSAGE, LIFECYCLE_ON_DATA, MAX_INDEX, MODULE_PATTERN, NIXOPS4_CONFIG, NIXOPS4_VERSION,
    NODE_ID_PATTERN, NODE_KEYS, PROVIDER_PATTERN, SCHEMA_VERSION_MESSAGE, STATELESS_NOT_NIXOPS4,
    UNKNOWN_MARKER,
};

/// Parse and validate an IR document. On failure, every structural error, or
/// (for a structurally sound document) every referential error.
pub fn parse(bytes: &[u8]) -> Result<Ir, Vec<IrError>> {
    // Section by section and element by element when it can (no JSON tree of the whole
    // document); what it hands back is read whole, with the same rules and the same words.
    if let Some(result) = super::stream::parse_streaming(bytes) {
        return result;
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => parse_value(&value),
        Err(e) => Err(vec![IrError {
            location: "ir".into(),
            message: format!("invalid JSON: {e}"),
        }]),
    }
}

/// [`parse`] for an already decoded JSON value.
// Long because it checks the document's top-level keys one by one, in the order of docs/ir-
// schema.json and of check.py, so the two report alike.
pub fn parse_value(doc: &Value) -> Result<Ir, Vec<IrError>> {
    let mut p = Parser::new();
    let Some(top) = doc.as_object() else {
        p.error("ir", &[], not_of_type(doc, "'object'"));
        return Err(p.errors);
    };
    // Derived inputs are split at the longest declared id, so collect ids first.
    for section in ["resources", "data", "ephemeral"] {
        if let Some(Value::Array(items)) = top.get(section) {
            for item in items {
                if let Some(Value::String(id)) = item.get("id") {
                    p.ids.insert(id.clone());
                }
            }
        }
    }

    p.object_keys("ir", &[], top, TOP_REQUIRED, TOP_ALLOWED);
    if let Some(v) = top.get("schemaVersion") {
        p.schema_version(v);
    }
    let providers = top
        .get("providers")
        .map(|v| p.providers(v))
        .unwrap_or_default();
    let resources = top
        .get("resources")
        .map(|v| p.nodes(v, NodeKind::Managed))
        .unwrap_or_default();
    let data = top
        .get("data")
        .map(|v| p.nodes(v, NodeKind::Data))
        .unwrap_or_default();
    let edges = top.get("edges").map(|v| p.edges(v)).unwrap_or_default();
    let consumers = top
        .get("nixConsumers")
        .map(|v| p.consumers(v))
        .unwrap_or_default();
    let variables = top
        .get("variables")
        .map(|v| p.variables(v))
        .unwrap_or_default();
    let moved = top.get("moved").map(|v| p.moved(v)).unwrap_or_default();
    let ephemeral = top
        .get("ephemeral")
        .map(|v| p.ephemeral(v))
        .unwrap_or_default();
    let conditions = top
        .get("conditions")
        .map(|v| p.conditions(v))
        .unwrap_or_default();
    let removed = top.get("removed").map(|v| p.removed(v)).unwrap_or_default();
    let without_ledger =
        (top.get("withoutLedger")).is_some_and(|v| p.boolean("withoutLedger", &[], v));
    if !p.errors.is_empty() {
        return Err(p.errors);
    }
    check_referentially(Ir {
        providers,
        resources,
        data,
        edges,
        consumers,
        variables,
        moved,
        ephemeral,
        conditions,
        removed,
        without_ledger,
    })
}

/// The document's required top-level keys.
pub(super) const TOP_REQUIRED: &[&str] = &[
    "schemaVersion",
    "providers",
    "resources",
    "edges",
    "nixConsumers",
];

/// Every top-level key, in the order the structural layer checks (and reports) them.
pub(super) const TOP_ALLOWED: &[&str] = &[
    "schemaVersion",
    "providers",
    "resources",
    "data",
    "edges",
    "nixConsumers",
    "variables",
    "moved",
    "removed",
    "ephemeral",
    "conditions",
    "withoutLedger",
];

/// The referential layer on a structurally sound IR.
pub(super) fn check_referentially(ir: Ir) -> Result<Ir, Vec<IrError>> {
    let errors = check_references(&ir);
    if errors.is_empty() {
        Ok(ir)
    } else {
        Err(errors)
    }
}

pub(super) struct Parser {
    pub(super) errors: Vec<IrError>,
    /// The declared node ids, for splitting derived inputs (`split_input`).
    pub(super) ids: HashSet<String>,
    /// Whether a `__derived` input was split (with `ids` as they were then).
    pub(super) derived_seen: bool,
}

/// Builds a path by appending one step, without disturbing the parent.
pub(super) fn child(path: &[PathStep], step: PathStep) -> Vec<PathStep> {
    let mut p = Vec::with_capacity(path.len() + 1);
    p.extend_from_slice(path);
    p.push(step);
    p
}

pub(super) fn element_label(section: &str, index: usize, item: &Value) -> String {
    let label = format!("{section}[{index}]");
    if section == "removed" {
        return match item.get("from") {
            Some(Value::String(f)) => format!("{label} ({f})"),
            _ => label,
        };
    }
    if section == "edges" || section == "moved" {
        return match (item.get("from"), item.get("to")) {
            (Some(Value::String(f)), Some(Value::String(t))) => format!("{label} ({f} -> {t})"),
            _ => label,
        };
    }
    match item.get("id") {
        Some(Value::String(id)) => format!("{label} ({id})"),
        _ => label,
    }
}

impl Parser {
    pub(super) fn new() -> Parser {
        Parser {
            errors: Vec::new(),
            ids: HashSet::new(),
            derived_seen: false,
        }
    }

    pub(super) fn error(&mut self, element: &str, path: &[PathStep], message: String) {
        self.errors.push(located(element, path, message));
    }

    /// `required` and `additionalProperties: false`.
    pub(super) fn object_keys(
        &mut self,
        el: &str,
        path: &[PathStep],
        obj: &Map<String, Value>,
        required: &[&str],
        allowed: &[&str],
    ) {
        self.key_names(el, path, obj.keys().map(String::as_str), required, allowed);
    }

    /// [`Parser::object_keys`] for an object known by its keys.
    pub(super) fn key_names<'k>(
        &mut self,
        el: &str,
        path: &[PathStep],
        keys: impl Iterator<Item = &'k str> + Clone,
        required: &[&str],
        allowed: &[&str],
    ) {
        for k in required {
            if !keys.clone().any(|present| present == *k) {
                self.error(el, path, format!("{} is a required property", py_str(k)));
            }
        }
        let mut extra: Vec<&str> = keys.filter(|k| !allowed.contains(k)).collect();
        if !extra.is_empty() {
            extra.sort();
            let verb = if extra.len() == 1 { "was" } else { "were" };
            let list = extra
                .iter()
                .map(|k| py_str(k))
                .collect::<Vec<_>>()
                .join(", ");
            self.error(
                el,
                path,
                format!("Additional properties are not allowed ({list} {verb} unexpected)"),
            );
        }
    }

    pub(super) fn object<'v>(
        &mut self,
        el: &str,
        path: &[PathStep],
        v: &'v Value,
    ) -> Option<&'v Map<String, Value>> {
        let obj = v.as_object();
        if obj.is_none() {
            self.error(el, path, not_of_type(v, "'object'"));
        }
        obj
    }

    pub(super) fn array<'v>(
        &mut self,
        el: &str,
        path: &[PathStep],
        v: &'v Value,
    ) -> Option<&'v Vec<Value>> {
        let arr = v.as_array();
        if arr.is_none() {
            self.error(el, path, not_of_type(v, "'array'"));
        }
        arr
    }

    pub(super) fn string(&mut self, el: &str, path: &[PathStep], v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.error(el, path, not_of_type(v, "'string'"));
                None
            }
        }
    }

    pub(super) fn boolean(&mut self, el: &str, path: &[PathStep], v: &Value) -> bool {
        match v {
            Value::Bool(b) => *b,
            _ => {
                self.error(el, path, not_of_type(v, "'boolean'"));
                false
            }
        }
    }

    /// `schemaVersion`: 1.
    pub(super) fn schema_version(&mut self, v: &Value) {
        if !matches!(v, Value::Number(n) if n.as_f64() == Some(1.0)) {
            self.error("schemaVersion", &[], SCHEMA_VERSION_MESSAGE.into());
        }
    }

    /// A string matching `pattern` (checked by `ok`).
    pub(super) fn pattern(
        &mut self,
        el: &str,
        path: &[PathStep],
        v: &Value,
        ok: fn(&str) -> bool,
        pattern: &str,
    ) -> String {
        match self.string(el, path, v) {
            Some(s) if ok(&s) => s,
            Some(s) => {
                self.error(el, path, no_match(&s, pattern));
                s
            }
            None => String::new(),
        }
    }

    pub(super) fn providers(&mut self, v: &Value) -> BTreeMap<String, ProviderDecl> {
        let mut out = BTreeMap::new();
        let Some(map) = self.object("providers", &[], v) else {
            return out;
        };
        for (id, decl) in map {
            if !is_provider_id(id) {
                self.error("providers", &[], no_match(id, PROVIDER_PATTERN));
            }
            let el = render_path(&[key("providers"), key(id)]);
            let Some(obj) = self.object(&el, &[], decl) else {
                continue;
            };
            self.object_keys(
                &el,
                &[],
                obj,
                &["source", "config"],
                &[
                    "source",
                    "version",
                    "config",
                    "kind",
                    "statelessTypes",
                    "drvPath",
                ],
            );
            let source = match obj.get("source") {
                Some(s) => match self.string(&el, &[key("source")], s) {
                    Some(s) if s.is_empty() => {
                        self.error(&el, &[key("source")], "'' should be non-empty".into());
                        s
                    }
                    s => s.unwrap_or_default(),
                },
                None => String::new(),
            };
            let version = obj
                .get("version")
                .and_then(|s| self.string(&el, &[key("version")], s));
            let config = match obj.get("config") {
                Some(c) => self.plain_object(&el, &[key("config")], c),
                None => Tree::Object(Fields::new()),
            };
            let kind = self.provider_kind(&el, obj);
            let drv_path = obj
                .get("drvPath")
                .and_then(|s| self.string(&el, &[key("drvPath")], s));
            out.insert(
                id.clone(),
                ProviderDecl {
                    source,
                    version,
                    config,
                    kind,
                    drv_path,
                },
            );
        }
        out
    }

    /// `kind` and `statelessTypes`, with the rules that depend on the kind (the schema's
    /// `if`/`then`/`else`): a nixops4 provider has no version and no configuration; only a
    /// nixops4 provider has `statelessTypes`.
    fn provider_kind(&mut self, el: &str, obj: &Map<String, Value>) -> ProviderKind {
        let nixops4 = match obj.get("kind") {
            None => false,
            Some(Value::String(k)) if k == "tfplugin" => false,
            Some(Value::String(k)) if k == "nixops4" => true,
            Some(_) => {
                self.error(el, &[key("kind")], KIND_MESSAGE.into());
                false
            }
        };
        let mut stateless_types = BTreeSet::new();
        if let Some(v) = obj.get("statelessTypes") {
            let path = [key("statelessTypes")];
            if !nixops4 {
                self.error(el, &path, STATELESS_NOT_NIXOPS4.into());
            }
            if let Some(items) = self.array(el, &path, v) {
                for (i, item) in items.iter().enumerate() {
                    let p = child(&path, PathStep::Index(i as u64));
                    stateless_types.insert(self.pattern(el, &p, item, is_ident, IDENT_PATTERN));
                }
            }
        }
        if !nixops4 {
            return ProviderKind::Tfplugin;
        }
        if obj.contains_key("version") {
            self.error(el, &[key("version")], NIXOPS4_VERSION.into());
        }
        if obj
            .get("config")
            .and_then(Value::as_object)
            .is_some_and(|c| !c.is_empty())
        {
            self.error(el, &[key("config")], NIXOPS4_CONFIG.into());
        }
        ProviderKind::Nixops4 { stateless_types }
    }

    fn nodes(&mut self, v: &Value, kind: NodeKind) -> Vec<Node> {
        let section = if kind == NodeKind::Data {
            "data"
        } else {
            "resources"
        };
        let Some(items) = self.array(section, &[], v) else {
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.node(&element_label(section, i, item), item, kind))
            .collect()
    }

    // Long because it checks one node's keys one by one, in the order of docs/ir-schema.json and of
    // check.py.
    pub(super) fn node(&mut self, el: &str, v: &Value, kind: NodeKind) -> Option<Node> {
        let obj = self.object(el, &[], v)?;
        self.object_keys(
            el,
            &[],
            obj,
            &["id", "provider", "type", "name", "config"],
            NODE_KEYS,
        );
        let (id_ok, id_pattern): (fn(&str) -> bool, _) = if kind == NodeKind::Data {
            (is_data_id, DATA_ID_PATTERN)
        } else {
            (is_node_id, NODE_ID_PATTERN)
        };
        let id = obj
            .get("id")
            .map(|x| self.pattern(el, &[key("id")], x, id_ok, id_pattern))
            .unwrap_or_default();
        let provider = obj
            .get("provider")
            .map(|x| self.pattern(el, &[key("provider")], x, is_provider_id, PROVIDER_PATTERN))
            .unwrap_or_default();
        let type_name = obj
            .get("type")
            .map(|x| self.pattern(el, &[key("type")], x, is_ident, IDENT_PATTERN))
            .unwrap_or_default();
        let name = obj
            .get("name")
            .map(|x| self.pattern(el, &[key("name")], x, is_ident, IDENT_PATTERN))
            .unwrap_or_default();
        let module = obj
            .get("module")
            .map(|x| self.pattern(el, &[key("module")], x, is_module_prefix, MODULE_PATTERN));
        let instance_key = obj.get("key").and_then(|k| self.instance_key(el, k, &name));
        let config = obj
            .get("config")
            .map(|c| self.plain_object(el, &[key("config")], c))
            .unwrap_or(Tree::Null);
        let mut depends_on = Vec::new();
        let mut lifecycle = Lifecycle::default();
        let mut import_id = None;
        if let Some(meta) = obj.get("meta") {
            let mpath = [key("meta")];
            if let Some(m) = self.object(el, &mpath, meta) {
                let allowed: &[&str] = if kind == NodeKind::Managed {
                    &[
                        "dependsOn",
                        "lifecycle",
                        "importId",
                        "count",
                        "for_each",
                        "forEach",
                    ]
                } else {
                    &["dependsOn", "lifecycle", "count", "for_each", "forEach"]
                };
                self.object_keys(el, &mpath, m, &[], allowed);
                if let Some(v) = m.get("importId").filter(|_| kind == NodeKind::Managed) {
                    let ipath = child(&mpath, key("importId"));
                    import_id = self.string(el, &ipath, v);
                    if import_id.as_deref() == Some("") {
                        self.error(el, &ipath, "'' should be non-empty".into());
                    }
                }
                for (k, _) in m.iter() {
                    if let Some(message) = expansion_message(k) {
                        self.error(el, &child(&mpath, key(k)), message.into());
                    }
                }
                if let Some(deps) = m.get("dependsOn") {
                    let dpath = child(&mpath, key("dependsOn"));
                    if let Some(list) = self.array(el, &dpath, deps) {
                        for (i, d) in list.iter().enumerate() {
                            let p = child(&dpath, PathStep::Index(i as u64));
                            depends_on.push(self.pattern(el, &p, d, is_node_id, NODE_ID_PATTERN));
                        }
                    }
                }
                if let Some(l) = m.get("lifecycle") {
                    let lpath = child(&mpath, key("lifecycle"));
                    if kind == NodeKind::Data {
                        self.error(el, &lpath, LIFECYCLE_ON_DATA.into());
                    } else {
                        lifecycle = self.lifecycle(el, &lpath, l);
                    }
                }
            }
        }
        Some(Node {
            kind,
            id,
            provider,
            type_name,
            name,
            module,
            config,
            depends_on,
            lifecycle,
            import_id,
            key: instance_key,
        })
    }

    pub(super) fn tree(&mut self, el: &str, path: &[PathStep], v: &Value) -> Tree {
        match v {
            Value::Null => Tree::Null,
            Value::Bool(b) => Tree::Bool(*b),
            Value::Number(n) => Tree::Number(n.clone()),
            Value::String(s) => Tree::String(s.clone()),
            Value::Array(items) => Tree::List(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.tree(el, &child(path, PathStep::Index(i as u64)), x))
                    .collect(),
            ),
            Value::Object(obj) => {
                for marker in [
                    "__ref",
                    "__sensitiveRef",
                    "__derived",
                    "__build",
                    "__sensitive",
                    "__ephemeral",
                ] {
                    if let Some(body) = obj.get(marker) {
                        self.object_keys(el, path, obj, &[], &[marker]);
                        return self.marker(el, &child(path, key(marker)), marker, body);
                    }
                }
                self.plain_entries(el, path, obj)
            }
        }
    }

    /// A tree that must be a plain object (configs).
    pub(super) fn plain_object(&mut self, el: &str, path: &[PathStep], v: &Value) -> Tree {
        match self.object(el, path, v) {
            Some(obj) => self.plain_entries(el, path, obj),
            None => Tree::Object(Fields::new()),
        }
    }

    fn plain_entries(&mut self, el: &str, path: &[PathStep], obj: &Map<String, Value>) -> Tree {
        let mut out = Fields::with_capacity(obj.len());
        for (k, x) in obj {
            let p = child(path, key(k));
            if k.starts_with("__") {
                self.error(el, &p, UNKNOWN_MARKER.into());
                continue;
            }
            out.insert(k.clone(), self.tree(el, &p, x));
        }
        Tree::Object(out)
    }

    // Long because it has one arm per leaf marker, each checking that marker's subschema.
    fn marker(&mut self, el: &str, path: &[PathStep], marker: &str, body: &Value) -> Tree {
        let Some(obj) = self.object(el, path, body) else {
            return Tree::Null;
        };
        match marker {
            "__ref" | "__sensitiveRef" => {
                self.object_keys(el, path, obj, &["resource", "path"], &["resource", "path"]);
                let resource = obj
                    .get("resource")
                    .map(|r| {
                        self.pattern(
                            el,
                            &child(path, key("resource")),
                            r,
                            is_node_id,
                            NODE_ID_PATTERN,
                        )
                    })
                    .unwrap_or_default();
                let steps = obj
                    .get("path")
                    .map(|p| self.ref_path(el, &child(path, key("path")), p))
                    .unwrap_or_default();
                let r = Ref {
                    resource,
                    path: steps,
                };
                if marker == "__ref" {
                    Tree::Ref(r)
                } else {
                    Tree::SensitiveRef(r)
                }
            }
            "__derived" => {
                self.object_keys(el, path, obj, &["inputs"], &["inputs"]);
                let mut inputs = Vec::new();
                if let Some(list) = obj.get("inputs") {
                    let ipath = child(path, key("inputs"));
                    if let Some(items) = self.array(el, &ipath, list) {
                        if items.is_empty() {
                            self.error(el, &ipath, "[] should be non-empty".into());
                        }
                        for (i, item) in items.iter().enumerate() {
                            let p = child(&ipath, PathStep::Index(i as u64));
                            let text =
                                self.pattern(el, &p, item, is_derived_input, DERIVED_INPUT_PATTERN);
                            self.derived_seen = true;
                            inputs.push(self.split_input(&text));
                        }
                    }
                }
                Tree::Derived(inputs)
            }
            "__sensitive" | "__ephemeral" => {
                self.object_keys(el, path, obj, &["value"], &["value"]);
                let value = obj
                    .get("value")
                    .map(|v| self.tree(el, &child(path, key("value")), v))
                    .unwrap_or(Tree::Null);
                if marker == "__sensitive" {
                    Tree::Sensitive(Box::new(value))
                } else {
                    Tree::Ephemeral(Box::new(value))
                }
            }
            _ => {
                self.object_keys(el, path, obj, &["path"], &["path", "drvPath"]);
                let bpath = obj
                    .get("path")
                    .map(|p| {
                        self.pattern(
                            el,
                            &child(path, key("path")),
                            p,
                            |s| s.starts_with('/'),
                            BUILD_PATH_PATTERN,
                        )
                    })
                    .unwrap_or_default();
                let drv_path = obj.get("drvPath").map(|p| {
                    self.pattern(
                        el,
                        &child(path, key("drvPath")),
                        p,
                        is_drv_path,
                        DRV_PATH_PATTERN,
                    )
                });
                Tree::Build(Build {
                    path: bpath,
                    drv_path,
                })
            }
        }
    }

    pub(super) fn ref_path(&mut self, el: &str, path: &[PathStep], v: &Value) -> Vec<PathStep> {
        let Some(items) = self.array(el, path, v) else {
            return Vec::new();
        };
        if items.is_empty() {
            self.error(el, path, "[] should be non-empty".into());
        }
        let mut steps = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = child(path, PathStep::Index(i as u64));
            match item {
                Value::String(s) => steps.push(PathStep::Key(s.clone())),
                Value::Number(n) => match integer_value(n) {
                    Some(i) if i < 0 => {
                        self.error(el, &p, format!("{n} is less than the minimum of 0"))
                    }
                    Some(i) if i > MAX_INDEX as i128 => self.error(
                        el,
                        &p,
                        format!("{n} is greater than the maximum of {MAX_INDEX}"),
                    ),
                    Some(i) => steps.push(PathStep::Index(i as u64)),
                    None => self.error(el, &p, not_of_type(item, "'string', 'integer'")),
                },
                _ => self.error(el, &p, not_of_type(item, "'string', 'integer'")),
            }
        }
        steps
    }

    /// `<id>.<attr>` split at the longest declared id (else at the last dot).
    pub(super) fn split_input(&self, text: &str) -> DerivedInput {
        let mut end = text.len();
        while let Some(dot) = text[..end].rfind('.') {
            if dot > 0 && dot + 1 < text.len() && self.ids.contains(&text[..dot]) {
                return DerivedInput {
                    resource: text[..dot].into(),
                    attr: text[dot + 1..].into(),
                };
            }
            end = dot;
        }
        match text.rsplit_once('.') {
            Some((id, attr)) => DerivedInput {
                resource: id.into(),
                attr: attr.into(),
            },
            None => DerivedInput {
                resource: text.into(),
                attr: String::new(),
            },
        }
    }
}
