//! What differs between tfplugin5 and tfplugin6, and nothing else.
//!
//! The two protocols are field-for-field identical for every message Nivis sends except the
//! schema response (attribute fields 10-12 moved when v6 added nested attribute types) and
//! provider-config validation (v5 `PrepareProviderConfig` carries diagnostics in field 2 after a
//! prepared config; v6 `ValidateProviderConfig` in field 2 with field 1 unused). So the client
//! uses the v6 message types for both protocols and only the method paths differ; the two
//! schema conversions and the v5 config-validation call are the whole v5 adapter. The test
//! `reused_messages_are_wire_identical` proves the shared messages match field by field.

use std::collections::BTreeMap;

use protobuf::MessageField;

use super::wire::tfplugin5 as v5;
use super::wire::tfplugin6 as v6;
use crate::diag::{Diagnostic, Diagnostics, Severity};
use crate::schema::{
    AttrType, Attribute, Block, BlockNesting, NestedBlock, NestedObject, ObjectNesting,
    ProviderSchema, Schema,
};
use crate::value::{PathStep, Type};

/// The RPC paths of one protocol version.
pub(super) struct Methods {
    pub(crate) get_schema: &'static str,
    pub(crate) validate_provider_config: &'static str,
    pub(crate) validate_resource_config: &'static str,
    pub(crate) validate_data_config: &'static str,
    pub(crate) upgrade_resource_state: &'static str,
    pub(crate) configure: &'static str,
    pub(crate) read_resource: &'static str,
    pub(crate) plan_resource_change: &'static str,
    pub(crate) apply_resource_change: &'static str,
    pub(crate) import_resource_state: &'static str,
    pub(crate) read_data_source: &'static str,
    pub(crate) stop: &'static str,
    pub(crate) validate_ephemeral_config: &'static str,
    pub(crate) open_ephemeral: &'static str,
    pub(crate) renew_ephemeral: &'static str,
    pub(crate) close_ephemeral: &'static str,
}

static V5: Methods = Methods {
    get_schema: "/tfplugin5.Provider/GetSchema",
    validate_provider_config: "/tfplugin5.Provider/PrepareProviderConfig",
    validate_resource_config: "/tfplugin5.Provider/ValidateResourceTypeConfig",
    validate_data_config: "/tfplugin5.Provider/ValidateDataSourceConfig",
    upgrade_resource_state: "/tfplugin5.Provider/UpgradeResourceState",
    configure: "/tfplugin5.Provider/Configure",
    read_resource: "/tfplugin5.Provider/ReadResource",
    plan_resource_change: "/tfplugin5.Provider/PlanResourceChange",
    apply_resource_change: "/tfplugin5.Provider/ApplyResourceChange",
    import_resource_state: "/tfplugin5.Provider/ImportResourceState",
    read_data_source: "/tfplugin5.Provider/ReadDataSource",
    stop: "/tfplugin5.Provider/Stop",
    validate_ephemeral_config: "/tfplugin5.Provider/ValidateEphemeralResourceConfig",
    open_ephemeral: "/tfplugin5.Provider/OpenEphemeralResource",
    renew_ephemeral: "/tfplugin5.Provider/RenewEphemeralResource",
    close_ephemeral: "/tfplugin5.Provider/CloseEphemeralResource",
};

static V6: Methods = Methods {
    get_schema: "/tfplugin6.Provider/GetProviderSchema",
    validate_provider_config: "/tfplugin6.Provider/ValidateProviderConfig",
    validate_resource_config: "/tfplugin6.Provider/ValidateResourceConfig",
    validate_data_config: "/tfplugin6.Provider/ValidateDataResourceConfig",
    upgrade_resource_state: "/tfplugin6.Provider/UpgradeResourceState",
    configure: "/tfplugin6.Provider/ConfigureProvider",
    read_resource: "/tfplugin6.Provider/ReadResource",
    plan_resource_change: "/tfplugin6.Provider/PlanResourceChange",
    apply_resource_change: "/tfplugin6.Provider/ApplyResourceChange",
    import_resource_state: "/tfplugin6.Provider/ImportResourceState",
    read_data_source: "/tfplugin6.Provider/ReadDataSource",
    stop: "/tfplugin6.Provider/StopProvider",
    validate_ephemeral_config: "/tfplugin6.Provider/ValidateEphemeralResourceConfig",
    open_ephemeral: "/tfplugin6.Provider/OpenEphemeralResource",
    renew_ephemeral: "/tfplugin6.Provider/RenewEphemeralResource",
    close_ephemeral: "/tfplugin6.Provider/CloseEphemeralResource",
};

/// The method table for a negotiated protocol major (launch only accepts 5 and 6).
pub(super) fn methods(protocol: u32) -> &'static Methods {
    if protocol == 5 {
        &V5
    } else {
        &V6
    }
}

/// Converts a v6 DynamicValue into the (wire-identical) v5 message.
pub(super) fn dv_to_v5(dv: MessageField<v6::DynamicValue>) -> MessageField<v5::DynamicValue> {
    match dv.into_option() {
        Some(dv) => {
            let mut out = v5::DynamicValue::new();
            out.msgpack = dv.msgpack;
            out.json = dv.json;
            MessageField::some(out)
        }
        None => MessageField::none(),
    }
}

/// The error string of a Stop/StopProvider answer.
pub(super) fn stop_error(resp: &v6::stop_provider::Response) -> String {
    resp.Error.clone()
}

/// Why a provider's schema answer cannot be converted: what is wrong, and where in the schema.
#[derive(Debug)]
pub(crate) struct SchemaError {
    /// Where, outermost first: `resource type null_resource`, `in block "timeouts"`.
    within: Vec<String>,
    /// What is wrong there.
    problem: SchemaProblem,
}

/// What is wrong in a provider's schema.
#[derive(Debug)]
enum SchemaProblem {
    /// An attribute's type is not a cty type.
    UnreadableType {
        /// The attribute's name.
        attr: String,
        /// Why the type does not parse.
        source: crate::value::ValueError,
    },
    /// A nested block has no nesting mode.
    NoBlockNesting {
        /// The block's type name.
        block: String,
    },
    /// A nested attribute (v6) has no nesting mode.
    NoObjectNesting {
        /// The attribute's name.
        attr: String,
    },
}

impl SchemaError {
    fn new(problem: SchemaProblem) -> SchemaError {
        SchemaError {
            within: Vec::new(),
            problem,
        }
    }

    /// The same error, one level further out (`context` encloses what was there).
    fn within(mut self, context: String) -> SchemaError {
        self.within.insert(0, context);
        self
    }
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for context in &self.within {
            write!(f, "{context}: ")?;
        }
        match &self.problem {
            SchemaProblem::UnreadableType { attr, source } => {
                write!(f, "attribute {attr:?} has an unreadable type: {source}")
            }
            SchemaProblem::NoBlockNesting { block } => {
                write!(f, "block {block:?} has no nesting mode")
            }
            SchemaProblem::NoObjectNesting { attr } => {
                write!(f, "nested attribute {attr:?} has no nesting mode")
            }
        }
    }
}

impl std::error::Error for SchemaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.problem {
            SchemaProblem::UnreadableType { source, .. } => Some(source),
            _ => None,
        }
    }
}

macro_rules! protocol_conversions {
    ($modname:ident, $pb:ident, |$name:ident, $attr:ident| $nested:expr) => {
        mod $modname {
            use super::*;
            use $pb as p;

            pub(super) fn diagnostics(list: &[p::Diagnostic]) -> Diagnostics {
                Diagnostics(
                    list.iter()
                        .map(|d| {
                            let severity = match d.severity.enum_value_or_default() {
                                p::diagnostic::Severity::WARNING => Severity::Warning,
                                _ => Severity::Error,
                            };
                            let path = d
                                .attribute
                                .as_ref()
                                .map(|a| attribute_path(a))
                                .filter(|p| !p.is_empty());
                            Diagnostic {
                                severity,
                                summary: d.summary.clone(),
                                detail: d.detail.clone(),
                                path,
                                resource: None,
                                provider_gone: None,
                            }
                        })
                        .collect(),
                )
            }

            pub(super) fn attribute_path(path: &p::AttributePath) -> Vec<PathStep> {
                use p::attribute_path::step::Selector;
                path.steps
                    .iter()
                    .filter_map(|s| match &s.selector {
                        Some(Selector::AttributeName(n)) => Some(PathStep::Attr(n.clone())),
                        Some(Selector::ElementKeyString(k)) => Some(PathStep::Key(k.clone())),
                        Some(Selector::ElementKeyInt(i)) => {
                            Some(PathStep::Index((*i).max(0) as u64))
                        }
                        None => None,
                    })
                    .collect()
            }

            fn attribute(
                $name: &str,
                $attr: &p::schema::Attribute,
            ) -> Result<Attribute, SchemaError> {
                let nested: Option<NestedObject> = $nested;
                let ty = match nested {
                    Some(object) => AttrType::Nested(object),
                    None => AttrType::Type(Type::from_json(&$attr.type_).map_err(|source| {
                        SchemaError::new(SchemaProblem::UnreadableType {
                            attr: $name.to_string(),
                            source,
                        })
                    })?),
                };
                Ok(Attribute {
                    ty,
                    required: $attr.required,
                    optional: $attr.optional,
                    computed: $attr.computed,
                    sensitive: $attr.sensitive,
                    write_only: $attr.write_only,
                    description: $attr.description.clone(),
                    deprecated: $attr.deprecated,
                    deprecation_message: $attr.deprecation_message.clone(),
                })
            }

            fn attributes(
                list: &[p::schema::Attribute],
            ) -> Result<BTreeMap<String, Attribute>, SchemaError> {
                list.iter()
                    .map(|a| Ok((a.name.clone(), attribute(&a.name, a)?)))
                    .collect()
            }

            fn block(b: &p::schema::Block) -> Result<Block, SchemaError> {
                let mut block_types = BTreeMap::new();
                for nb in &b.block_types {
                    use p::schema::nested_block::NestingMode as M;
                    let nesting = match nb.nesting.enum_value_or_default() {
                        M::SINGLE => BlockNesting::Single,
                        M::GROUP => BlockNesting::Group,
                        M::LIST => BlockNesting::List,
                        M::SET => BlockNesting::Set,
                        M::MAP => BlockNesting::Map,
                        M::INVALID => {
                            return Err(SchemaError::new(SchemaProblem::NoBlockNesting {
                                block: nb.type_name.clone(),
                            }))
                        }
                    };
                    let inner = block(nb.block.as_ref().unwrap_or(&p::schema::Block::new()))
                        .map_err(|e| e.within(format!("in block {:?}", nb.type_name)))?;
                    block_types.insert(
                        nb.type_name.clone(),
                        NestedBlock {
                            block: inner,
                            nesting,
                            min_items: nb.min_items,
                            max_items: nb.max_items,
                        },
                    );
                }
                Ok(Block {
                    attributes: attributes(&b.attributes)?,
                    block_types,
                    description: b.description.clone(),
                    deprecated: b.deprecated,
                })
            }

            fn schema(s: &MessageField<p::Schema>, what: &str) -> Result<Schema, SchemaError> {
                let Some(s) = s.as_ref() else {
                    return Ok(Schema::default());
                };
                let b = match s.block.as_ref() {
                    Some(b) => block(b).map_err(|e| e.within(what.to_string()))?,
                    None => Block::default(),
                };
                Ok(Schema {
                    version: s.version,
                    block: b,
                })
            }

            fn schema_map(
                map: &std::collections::HashMap<String, p::Schema>,
                kind: &str,
            ) -> Result<BTreeMap<String, Schema>, SchemaError> {
                map.iter()
                    .map(|(k, v)| {
                        Ok((
                            k.clone(),
                            schema(&MessageField::some(v.clone()), &format!("{kind} {k}"))?,
                        ))
                    })
                    .collect()
            }

            pub(super) fn provider_schema(
                r: &p::get_provider_schema::Response,
            ) -> Result<(ProviderSchema, Diagnostics), SchemaError> {
                let caps = r.server_capabilities.as_ref();
                let meta = if r.provider_meta.is_some() {
                    Some(schema(&r.provider_meta, "provider_meta")?)
                } else {
                    None
                };
                Ok((
                    ProviderSchema {
                        provider: schema(&r.provider, "provider configuration")?,
                        provider_meta: meta,
                        resources: schema_map(&r.resource_schemas, "resource type")?,
                        data_sources: schema_map(&r.data_source_schemas, "data source")?,
                        ephemeral_resources: schema_map(
                            &r.ephemeral_resource_schemas,
                            "ephemeral resource type",
                        )?,
                        plan_destroy: caps.map(|c| c.plan_destroy).unwrap_or(false),
                        get_provider_schema_optional: caps
                            .map(|c| c.get_provider_schema_optional)
                            .unwrap_or(false),
                    },
                    diagnostics(&r.diagnostics),
                ))
            }
        }
    };
}

protocol_conversions!(conv5, v5, |_name, _a| None);
protocol_conversions!(conv6, v6, |name, a| match a.nested_type.as_ref() {
    None => None,
    Some(object) => {
        use p::schema::object::NestingMode as M;
        let nesting = match object.nesting.enum_value_or_default() {
            M::SINGLE => ObjectNesting::Single,
            M::LIST => ObjectNesting::List,
            M::SET => ObjectNesting::Set,
            M::MAP => ObjectNesting::Map,
            M::INVALID => {
                return Err(SchemaError::new(SchemaProblem::NoObjectNesting {
                    attr: name.to_string(),
                }))
            }
        };
        Some(NestedObject {
            attributes: attributes(&object.attributes)?,
            nesting,
        })
    }
});

/// Converts a v5 GetSchema answer.
pub(super) fn schema_from_v5(
    r: &v5::get_provider_schema::Response,
) -> Result<(ProviderSchema, Diagnostics), SchemaError> {
    conv5::provider_schema(r)
}

/// Converts a v6 GetProviderSchema answer.
pub(super) fn schema_from_v6(
    r: &v6::get_provider_schema::Response,
) -> Result<(ProviderSchema, Diagnostics), SchemaError> {
    conv6::provider_schema(r)
}

/// Converts diagnostics of the shared (v6-typed) messages.
pub(super) fn diagnostics(list: &[v6::Diagnostic]) -> Diagnostics {
    conv6::diagnostics(list)
}

/// Converts diagnostics of v5's PrepareProviderConfig.
pub(super) fn diagnostics_v5(list: &[v5::Diagnostic]) -> Diagnostics {
    conv5::diagnostics(list)
}

/// Converts an attribute path of the shared messages.
pub(super) fn attribute_path(path: &v6::AttributePath) -> Vec<PathStep> {
    conv6::attribute_path(path)
}

#[cfg(test)]
mod tests {
    use protobuf::reflect::MessageDescriptor;
    use protobuf::MessageFull;

    use super::*;

    /// Field numbers, wire types and nested message shapes of two messages must agree.
    fn same_wire(a: &MessageDescriptor, b: &MessageDescriptor, depth: usize) -> Result<(), String> {
        let fields_a: Vec<_> = a.fields().collect();
        let fields_b: Vec<_> = b.fields().collect();
        for fa in &fields_a {
            let Some(fb) = fields_b.iter().find(|f| f.number() == fa.number()) else {
                return Err(format!(
                    "{}: field {} missing in {}",
                    a.full_name(),
                    fa.number(),
                    b.full_name()
                ));
            };
            if fa.proto().type_() != fb.proto().type_() || fa.proto().label() != fb.proto().label()
            {
                return Err(format!(
                    "{}.{}: type differs from {}",
                    a.full_name(),
                    fa.name(),
                    b.full_name()
                ));
            }
            if let (
                protobuf::reflect::RuntimeFieldType::Singular(
                    protobuf::reflect::RuntimeType::Message(ma),
                ),
                protobuf::reflect::RuntimeFieldType::Singular(
                    protobuf::reflect::RuntimeType::Message(mb),
                ),
            ) = (fa.runtime_field_type(), fb.runtime_field_type())
            {
                if depth < 6 {
                    same_wire(&ma, &mb, depth + 1)?;
                }
            }
            if let (
                protobuf::reflect::RuntimeFieldType::Repeated(
                    protobuf::reflect::RuntimeType::Message(ma),
                ),
                protobuf::reflect::RuntimeFieldType::Repeated(
                    protobuf::reflect::RuntimeType::Message(mb),
                ),
            ) = (fa.runtime_field_type(), fb.runtime_field_type())
            {
                if depth < 6 {
                    same_wire(&ma, &mb, depth + 1)?;
                }
            }
        }
        if fields_a.len() != fields_b.len() {
            return Err(format!(
                "{} and {} have different field counts",
                a.full_name(),
                b.full_name()
            ));
        }
        Ok(())
    }

    #[test]
    // Long because it lists every reused message pair; splitting it would hide one from the others.
    fn reused_messages_are_wire_identical() {
        let pairs = [
            (
                v5::configure::Request::descriptor(),
                v6::configure_provider::Request::descriptor(),
            ),
            (
                v5::configure::Response::descriptor(),
                v6::configure_provider::Response::descriptor(),
            ),
            (
                v5::validate_resource_type_config::Request::descriptor(),
                v6::validate_resource_config::Request::descriptor(),
            ),
            (
                v5::validate_resource_type_config::Response::descriptor(),
                v6::validate_resource_config::Response::descriptor(),
            ),
            (
                v5::validate_data_source_config::Request::descriptor(),
                v6::validate_data_resource_config::Request::descriptor(),
            ),
            (
                v5::validate_data_source_config::Response::descriptor(),
                v6::validate_data_resource_config::Response::descriptor(),
            ),
            (
                v5::upgrade_resource_state::Request::descriptor(),
                v6::upgrade_resource_state::Request::descriptor(),
            ),
            (
                v5::upgrade_resource_state::Response::descriptor(),
                v6::upgrade_resource_state::Response::descriptor(),
            ),
            (
                v5::read_resource::Request::descriptor(),
                v6::read_resource::Request::descriptor(),
            ),
            (
                v5::read_resource::Response::descriptor(),
                v6::read_resource::Response::descriptor(),
            ),
            (
                v5::plan_resource_change::Request::descriptor(),
                v6::plan_resource_change::Request::descriptor(),
            ),
            (
                v5::plan_resource_change::Response::descriptor(),
                v6::plan_resource_change::Response::descriptor(),
            ),
            (
                v5::apply_resource_change::Request::descriptor(),
                v6::apply_resource_change::Request::descriptor(),
            ),
            (
                v5::apply_resource_change::Response::descriptor(),
                v6::apply_resource_change::Response::descriptor(),
            ),
            (
                v5::import_resource_state::Request::descriptor(),
                v6::import_resource_state::Request::descriptor(),
            ),
            (
                v5::import_resource_state::Response::descriptor(),
                v6::import_resource_state::Response::descriptor(),
            ),
            (
                v5::read_data_source::Request::descriptor(),
                v6::read_data_source::Request::descriptor(),
            ),
            (
                v5::read_data_source::Response::descriptor(),
                v6::read_data_source::Response::descriptor(),
            ),
            (
                v5::stop::Request::descriptor(),
                v6::stop_provider::Request::descriptor(),
            ),
            (
                v5::stop::Response::descriptor(),
                v6::stop_provider::Response::descriptor(),
            ),
            (
                v5::validate_ephemeral_resource_config::Request::descriptor(),
                v6::validate_ephemeral_resource_config::Request::descriptor(),
            ),
            (
                v5::validate_ephemeral_resource_config::Response::descriptor(),
                v6::validate_ephemeral_resource_config::Response::descriptor(),
            ),
            (
                v5::open_ephemeral_resource::Request::descriptor(),
                v6::open_ephemeral_resource::Request::descriptor(),
            ),
            (
                v5::open_ephemeral_resource::Response::descriptor(),
                v6::open_ephemeral_resource::Response::descriptor(),
            ),
            (
                v5::renew_ephemeral_resource::Request::descriptor(),
                v6::renew_ephemeral_resource::Request::descriptor(),
            ),
            (
                v5::renew_ephemeral_resource::Response::descriptor(),
                v6::renew_ephemeral_resource::Response::descriptor(),
            ),
            (
                v5::close_ephemeral_resource::Request::descriptor(),
                v6::close_ephemeral_resource::Request::descriptor(),
            ),
            (
                v5::close_ephemeral_resource::Response::descriptor(),
                v6::close_ephemeral_resource::Response::descriptor(),
            ),
        ];
        for (a, b) in pairs {
            same_wire(&a, &b, 0).unwrap();
            same_wire(&b, &a, 0).unwrap();
        }
    }

    #[test]
    fn schema_messages_really_differ() {
        // The reason schema conversion is written twice: v6 moved attribute fields.
        let a = v5::schema::Attribute::descriptor();
        let b = v6::schema::Attribute::descriptor();
        assert!(same_wire(&a, &b, 0).is_err());
    }
}
