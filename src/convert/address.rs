//! How Terraform addresses become Nivis ids, one documented rule (DESIGN §92, the book's
//! "Coming from Terraform or OpenTofu"):
//!
//! - a provider `registry.terraform.io/hashicorp/null` gets the id `null` (its type); with an
//!   alias, `null_ALIAS`; two sources of the same type are told apart as `NAMESPACE_TYPE`;
//! - `null_resource.x` is `null.null_resource.x` (what `lib.mkResource` gives), its count
//!   instance `[1]` is `null.null_resource.x__1` (what `lib.count` gives) and its for_each
//!   instance `["web"]` is `null.null_resource.x__web` (what `lib.forEach` gives);
//! - a resource in a module is flattened: `module.app.null_resource.x` is named `app--x`, and a
//!   module instance `module.app[0]` contributes `app__0`, which the code of a module called with
//!   count or for_each names its instances by too (DESIGN §99);
//! - data sources take the `data.` prefix, as `lib.mkData` gives.
//!
//! Owns: these names and the refusal of what cannot be named (a for_each key with characters
//! a Nivis id cannot hold). Not: reading the state (`tfstate`) or writing code (`code`), which
//! both ask here so their names agree.

use std::collections::BTreeMap;

use super::tfstate::{IndexKey, ModuleStep, ProviderRef};

/// What separates module steps and the resource name in a flattened name.
pub(crate) const MODULE_SEPARATOR: &str = "--";

/// Whether `key` can be part of a Nivis id (`names.keyRe` of the Nix library).
pub(crate) fn is_instance_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The suffix an instance key adds to a name: `__1`, `__web`.
pub(crate) fn key_suffix(key: &IndexKey) -> Result<String, String> {
    match key {
        IndexKey::Int(i) => Ok(format!("__{i}")),
        IndexKey::Str(s) if is_instance_key(s) => Ok(format!("__{s}")),
        IndexKey::Str(s) => Err(format!(
            "the for_each key {} cannot be part of a Nivis id (letters, digits, '_' and '-' only): \
             rename the key in Terraform (`terraform state mv`) first",
            serde_json::Value::String(s.clone())
        )),
    }
}

/// The flat prefix of a module path: `app--`, `app__0--net--` (empty at the root).
pub(crate) fn module_prefix(module: &[ModuleStep]) -> Result<String, String> {
    let mut out = String::new();
    for step in module {
        out.push_str(&step.name);
        if let Some(k) = &step.key {
            out.push_str(&key_suffix(k)?);
        }
        out.push_str(MODULE_SEPARATOR);
    }
    Ok(out)
}

/// The Nivis name of one instance: the module prefix, the block name, the key suffix.
pub(crate) fn instance_name(
    module: &[ModuleStep],
    name: &str,
    key: Option<&IndexKey>,
) -> Result<String, String> {
    let suffix = match key {
        Some(k) => key_suffix(k)?,
        None => String::new(),
    };
    Ok(format!("{}{name}{suffix}", module_prefix(module)?))
}

/// A managed resource's id: `PROVIDER.TYPE.NAME`.
pub(crate) fn managed_id(provider: &str, type_name: &str, name: &str) -> String {
    format!("{provider}.{type_name}.{name}")
}

/// The provider ids of an estate, one per provider configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ProviderIds {
    ids: BTreeMap<ProviderRef, String>,
}

impl ProviderIds {
    /// Ids for `refs` (any order, repeats allowed), by the rule in the module doc.
    pub(crate) fn new<'a>(refs: impl IntoIterator<Item = &'a ProviderRef>) -> ProviderIds {
        let mut all: Vec<&ProviderRef> = refs.into_iter().collect();
        all.sort();
        all.dedup();
        let type_of = |source: &str| source.rsplit('/').next().unwrap_or(source).to_string();
        let mut sources_of_type: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for r in &all {
            let list = sources_of_type.entry(type_of(&r.source)).or_default();
            if !list.contains(&r.source.as_str()) {
                list.push(&r.source);
            }
        }
        let mut ids = BTreeMap::new();
        for r in all {
            let ty = type_of(&r.source);
            let base = if sources_of_type[&ty].len() > 1 {
                let mut parts = r.source.rsplit('/');
                let (t, ns) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                format!("{ns}_{t}")
            } else {
                ty
            };
            let id = match &r.alias {
                Some(a) => format!("{base}_{a}"),
                None => base,
            };
            ids.insert(r.clone(), id);
        }
        ProviderIds { ids }
    }

    /// The id of `r` (which `new` was given).
    pub(crate) fn id(&self, r: &ProviderRef) -> Option<&str> {
        self.ids.get(r).map(String::as_str)
    }

    /// Every configuration with its id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ProviderRef, &str)> {
        self.ids.iter().map(|(r, id)| (r, id.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(source: &str, alias: Option<&str>) -> ProviderRef {
        ProviderRef {
            source: source.into(),
            alias: alias.map(str::to_string),
        }
    }

    #[test]
    fn names_follow_count_for_each_and_module_paths() {
        let root: Vec<ModuleStep> = Vec::new();
        assert_eq!(
            instance_name(&root, "node", Some(&IndexKey::Int(1))).unwrap(),
            "node__1"
        );
        assert_eq!(
            instance_name(&root, "svc", Some(&IndexKey::Str("web".into()))).unwrap(),
            "svc__web"
        );
        let module = vec![
            ModuleStep {
                name: "app".into(),
                key: Some(IndexKey::Int(0)),
            },
            ModuleStep {
                name: "net".into(),
                key: None,
            },
        ];
        assert_eq!(instance_name(&module, "x", None).unwrap(), "app__0--net--x");
        let bad = instance_name(&root, "svc", Some(&IndexKey::Str("a.b".into()))).unwrap_err();
        assert!(bad.contains("\"a.b\""), "{bad}");
        assert_eq!(
            managed_id("null", "null_resource", "node__1"),
            "null.null_resource.node__1"
        );
    }

    #[test]
    fn provider_ids_are_types_unless_they_clash() {
        let refs = [
            p("registry.terraform.io/hashicorp/null", None),
            p("registry.terraform.io/hashicorp/null", Some("two")),
            p("registry.terraform.io/hashicorp/aws", None),
            p("registry.terraform.io/other/aws", None),
        ];
        let ids = ProviderIds::new(&refs);
        assert_eq!(ids.id(&refs[0]), Some("null"));
        assert_eq!(ids.id(&refs[1]), Some("null_two"));
        assert_eq!(ids.id(&refs[2]), Some("hashicorp_aws"));
        assert_eq!(ids.id(&refs[3]), Some("other_aws"));
    }
}
