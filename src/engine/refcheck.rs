//! Checks every reference against its target's schema once the provider is running, so a typo
//! such as `refAttr "ipv4_adress"` fails at plan time, naming the referring resource, where the
//! reference sits and what the target type does have, instead of waiting at the fixpoint for
//! an output that can never exist.
//!
//! Owns: walking `__ref`, `__sensitiveRef` and `__derived` inputs through the target's implied
//! type. Not: resolving values (`resolve`), ordering (`graph`), or starting providers.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{render_path, value_path, Ir, Node, NodeKind, PathStep, Tree};
use crate::schema::ProviderSchema;
use crate::value::convert::suggest;
use crate::value::Type;

/// Where references are checked from: a node's configuration, a provider's configuration or a
/// consumer value, and whose it is.
struct Site<'a> {
    owner: &'a str,
    tree: &'a Tree,
}

/// Checks the references of the whole IR whose targets' providers `schema_of` knows (the
/// providers already running); others are left for when their provider starts.
pub(super) fn check_references<'s>(
    ir: &Ir,
    schema_of: &dyn Fn(&str) -> Option<&'s ProviderSchema>,
) -> Diagnostics {
    let nodes: HashMap<&str, &Node> = ir.nodes().map(|n| (n.id.as_str(), n)).collect();
    // Implied types by (provider, kind, type name): computed once per resource type.
    let mut types: HashMap<(&str, NodeKind, &str), Option<Type>> = HashMap::new();
    let sites = ir
        .nodes()
        .map(|n| Site {
            owner: &n.id,
            tree: &n.config,
        })
        .chain(ir.providers.iter().map(|(id, p)| Site {
            owner: id,
            tree: &p.config,
        }))
        .chain(ir.consumers.iter().map(|c| Site {
            owner: &c.id,
            tree: &c.value,
        }));
    let mut diags = Diagnostics::new();
    for site in sites {
        site.tree.walk_leaves(|at, leaf| {
            let uses: Vec<(&str, Cow<[PathStep]>)> = match leaf {
                Tree::Ref(r) | Tree::SensitiveRef(r) => vec![(&r.resource, Cow::from(&r.path))],
                Tree::Derived(inputs) => inputs
                    .iter()
                    .map(|i| {
                        let path = vec![PathStep::Key(i.attr.clone())];
                        (i.resource.as_str(), Cow::from(path))
                    })
                    .collect(),
                _ => return,
            };
            for (target, path) in uses {
                // A missing target is the IR check's to report.
                let Some(&node) = nodes.get(target) else {
                    continue;
                };
                let key = (node.provider.as_str(), node.kind, node.type_name.as_str());
                let ty = types.entry(key).or_insert_with(|| {
                    let schema = schema_of(&node.provider)?;
                    let types = match node.kind {
                        NodeKind::Managed => &schema.resources,
                        NodeKind::Data => &schema.data_sources,
                    };
                    // An unknown type is reported by the node's own turn. A provider without
                    // schemas (NixOps4) lists no types: its outputs are dynamic, and a missing
                    // one is reported when the reference is resolved.
                    types.get(&node.type_name).map(|s| s.block.implied_type())
                });
                let Some(ty) = ty else {
                    continue;
                };
                if let Err(problem) = walk(ty, &path) {
                    diags.push(
                        Diagnostic::error(format!(
                            "reference to {target}{}{}: {} {problem}",
                            if matches!(path.first(), Some(PathStep::Index(_))) { "" } else { "." },
                            render_path(&path),
                            node.type_name,
                        ))
                        .with_detail(
                            "Outputs a resource can have are the attributes of its type's schema (`nivis gen` lists them). Fix the name in the reference.",
                        )
                        .for_resource(site.owner)
                        .at(value_path(at)),
                    );
                }
            }
        });
    }
    diags
}

/// Why a reference's attribute path has no match in its target's type: the step that failed,
/// where (the path before it, empty at the top), and what the type had there.
#[derive(Debug, PartialEq, Eq)]
enum PathMismatch {
    /// An object type without the key; `hint` is the closest attribute it has.
    NoAttribute {
        key: String,
        at: String,
        hint: Option<String>,
    },
    /// A tuple shorter than the index.
    NoElement { index: u64, at: String, len: usize },
    /// A type that cannot be stepped into that way (a string indexed, a list keyed).
    WrongType {
        step: PathStep,
        at: String,
        found: String,
    },
}

impl std::fmt::Display for PathMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let here = |at: &str| match at {
            "" => String::new(),
            at => format!(" at {at}"),
        };
        match self {
            PathMismatch::NoAttribute { key, at, hint } => {
                write!(f, "has no attribute {key:?}{}", here(at))?;
                match hint {
                    Some(best) => write!(f, "; did you mean {best:?}?"),
                    None => Ok(()),
                }
            }
            PathMismatch::NoElement { index, at, len } => write!(
                f,
                "has no element [{index}]{}: the tuple has {len} element(s)",
                here(at)
            ),
            PathMismatch::WrongType { step, at, found } => {
                let wanted = match step {
                    PathStep::Index(n) => format!("element [{n}]"),
                    PathStep::Key(k) => format!("attribute {k:?}"),
                };
                write!(
                    f,
                    "has no {wanted}{}: the value there has type {found}",
                    here(at)
                )
            }
        }
    }
}

/// Follows `path` through `ty`; the error says which step has no match.
fn walk(ty: &Type, path: &[PathStep]) -> Result<(), PathMismatch> {
    let mut ty = ty;
    for (i, step) in path.iter().enumerate() {
        let at = || render_path(&path[..i]);
        ty = match (ty, step) {
            (Type::Dynamic, _) => return Ok(()),
            (Type::Object { attrs, .. }, PathStep::Key(k)) => match attrs.get(k) {
                Some(t) => t,
                None => {
                    return Err(PathMismatch::NoAttribute {
                        key: k.clone(),
                        at: at(),
                        hint: suggest(k, attrs.keys().map(String::as_str)).map(str::to_string),
                    });
                }
            },
            (Type::Map(t), PathStep::Key(_)) => t,
            (Type::List(t) | Type::Set(t), PathStep::Index(_)) => t,
            (Type::Tuple(ts), PathStep::Index(n)) => match ts.get(*n as usize) {
                Some(t) => t,
                None => {
                    return Err(PathMismatch::NoElement {
                        index: *n,
                        at: at(),
                        len: ts.len(),
                    })
                }
            },
            (other, step) => {
                return Err(PathMismatch::WrongType {
                    step: step.clone(),
                    at: at(),
                    found: other.friendly_name(),
                });
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn obj(attrs: &[(&str, Type)]) -> Type {
        Type::Object {
            attrs: attrs
                .iter()
                .map(|(k, t)| (k.to_string(), t.clone()))
                .collect::<BTreeMap<_, _>>(),
            optional: BTreeSet::new(),
        }
    }

    #[test]
    fn paths_follow_objects_lists_maps_and_stop_at_dynamic() {
        let ty = obj(&[
            ("id", Type::String),
            ("ipv4_address", Type::String),
            ("net", Type::List(Box::new(obj(&[("ip", Type::String)])))),
            ("tags", Type::Map(Box::new(Type::String))),
            ("extra", Type::Dynamic),
        ]);
        let key = |k: &str| PathStep::Key(k.into());
        assert!(walk(&ty, &[key("id")]).is_ok());
        assert!(walk(&ty, &[key("net"), PathStep::Index(0), key("ip")]).is_ok());
        assert!(walk(&ty, &[key("tags"), key("anything")]).is_ok());
        assert!(walk(&ty, &[key("extra"), key("x"), PathStep::Index(3)]).is_ok());

        let e = walk(&ty, &[key("ipv4_adress")]).unwrap_err().to_string();
        assert_eq!(
            e,
            r#"has no attribute "ipv4_adress"; did you mean "ipv4_address"?"#
        );
        let e = walk(&ty, &[key("net"), PathStep::Index(0), key("ipp")])
            .unwrap_err()
            .to_string();
        assert_eq!(e, r#"has no attribute "ipp" at net[0]; did you mean "ip"?"#);
        let e = walk(&ty, &[key("id"), key("x")]).unwrap_err().to_string();
        assert_eq!(
            e,
            r#"has no attribute "x" at id: the value there has type string"#
        );
        let e = walk(&ty, &[key("net"), key("ip")]).unwrap_err().to_string();
        assert_eq!(
            e,
            r#"has no attribute "ip" at net: the value there has type list of object"#
        );
    }
}
