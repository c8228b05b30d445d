//! The messages of the NixOps4 resource provider protocol v0 that Nivis exchanges, written from
//! NixOps4's `resource-schema-v0.json`.
//!
//! Owns: the JSON shape of requests (serde) and the strict reading of one response line into a
//! [`Response`], with an error that says what was wrong with it. Not: sending or receiving lines
//! (`process`), nor what a response means for a resource (`adapter`).
//!
//! Every message is one JSON object with exactly one key naming its type. Nivis sends
//! `createResourceRequest` and `updateResourceRequest`; the state-provider requests
//! (`stateResourceEvent`, `stateResourceReadRequest`) serve NixOps4's own state storage, which
//! Nivis does not use.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

/// Input or output properties: an arbitrary JSON object.
pub(crate) type Properties = Map<String, Json>;

/// A request line.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Request {
    /// Provision a new resource.
    CreateResourceRequest(CreateResourceRequest),
    /// Change an existing (stateful) resource.
    UpdateResourceRequest(UpdateResourceRequest),
}

impl Request {
    /// The request's type, as the protocol names it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Request::CreateResourceRequest(_) => "createResourceRequest",
            Request::UpdateResourceRequest(_) => "updateResourceRequest",
        }
    }

    /// The response type that answers it.
    pub(crate) fn expected_response(&self) -> &'static str {
        match self {
            Request::CreateResourceRequest(_) => "createResourceResponse",
            Request::UpdateResourceRequest(_) => "updateResourceResponse",
        }
    }

    /// The request as one line of JSON (no newline).
    pub(crate) fn to_line(&self) -> String {
        serde_json::to_string(self).expect("requests serialise")
    }
}

/// `CreateResourceRequest`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CreateResourceRequest {
    /// The provider-defined resource type.
    #[serde(rename = "type")]
    pub(crate) type_name: String,
    /// The resource's configuration.
    pub(crate) input_properties: Properties,
    /// Whether the response is kept and updates may follow; a type that needs state must
    /// refuse `false`.
    pub(crate) is_stateful: bool,
}

/// `ExtantResource`: a resource as it was last applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExtantResource {
    /// The resource type.
    #[serde(rename = "type")]
    pub(crate) type_name: String,
    /// The inputs it was last applied with.
    pub(crate) input_properties: Properties,
    /// The outputs the provider returned then.
    pub(crate) output_properties: Properties,
}

/// `UpdateResourceRequest`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UpdateResourceRequest {
    /// The resource as it is now.
    pub(crate) resource: ExtantResource,
    /// The new inputs.
    pub(crate) input_properties: Properties,
}

/// A response line, read strictly.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Response {
    /// `createResourceResponse` or `updateResourceResponse`: the resource's outputs.
    Outputs {
        /// Which of the two it was.
        kind: &'static str,
        /// The output properties.
        outputs: Properties,
    },
    /// `errorResponse`: the operation failed.
    Error {
        /// What the provider says went wrong (possibly many lines).
        message: String,
    },
}

/// Why a line is not a response Nivis can use.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ResponseError {
    /// Not JSON at all.
    NotJson(String),
    /// JSON, but not an object with exactly one key.
    NotAMessage(String),
    /// A type the protocol does not define.
    UnknownType(String),
    /// A type the protocol defines, but not an answer to what Nivis sent.
    Unexpected(String),
    /// The right type with a malformed body.
    BadBody {
        /// The message type.
        kind: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::NotJson(e) => write!(f, "a line that is not JSON ({e})"),
            ResponseError::NotAMessage(what) => write!(
                f,
                "{what}, where a message is an object with exactly one key naming its type"
            ),
            ResponseError::UnknownType(kind) => {
                write!(f, "a response of unknown type {kind:?}")
            }
            ResponseError::Unexpected(kind) => write!(f, "an unexpected {kind}"),
            ResponseError::BadBody { kind, reason } => write!(f, "a malformed {kind}: {reason}"),
        }
    }
}

/// Response types of protocol v0 that never answer the requests Nivis sends.
const STATE_RESPONSES: [&str; 2] = ["stateResourceEventResponse", "stateResourceReadResponse"];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OutputsBody {
    output_properties: Properties,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorBody {
    message: String,
}

/// Reads one response line that answers a request expecting `expected` (e.g.
/// `createResourceResponse`); an `errorResponse` is always acceptable.
pub(crate) fn parse_response(line: &str, expected: &str) -> Result<Response, ResponseError> {
    let json: Json =
        serde_json::from_str(line).map_err(|e| ResponseError::NotJson(e.to_string()))?;
    let (kind, body) = match json {
        Json::Object(map) if map.len() == 1 => map.into_iter().next().expect("one entry"),
        Json::Object(map) => {
            return Err(ResponseError::NotAMessage(format!(
                "an object with {} keys",
                map.len()
            )))
        }
        other => {
            return Err(ResponseError::NotAMessage(format!(
                "JSON {}",
                json_kind(&other)
            )))
        }
    };
    let bad = |kind: &str, e: serde_json::Error| ResponseError::BadBody {
        kind: kind.to_string(),
        reason: e.to_string(),
    };
    match kind.as_str() {
        "errorResponse" => {
            let body: ErrorBody = serde_json::from_value(body).map_err(|e| bad(&kind, e))?;
            Ok(Response::Error {
                message: body.message,
            })
        }
        k @ ("createResourceResponse" | "updateResourceResponse") if k == expected => {
            let body: OutputsBody = serde_json::from_value(body).map_err(|e| bad(&kind, e))?;
            let kind = if k == "createResourceResponse" {
                "createResourceResponse"
            } else {
                "updateResourceResponse"
            };
            Ok(Response::Outputs {
                kind,
                outputs: body.output_properties,
            })
        }
        k if k == "createResourceResponse"
            || k == "updateResourceResponse"
            || STATE_RESPONSES.contains(&k) =>
        {
            Err(ResponseError::Unexpected(kind))
        }
        _ => Err(ResponseError::UnknownType(kind)),
    }
}

fn json_kind(j: &Json) -> &'static str {
    match j {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(j: Json) -> Properties {
        j.as_object().unwrap().clone()
    }

    #[test]
    fn requests_are_written_as_the_schema_spells_them() {
        let create = Request::CreateResourceRequest(CreateResourceRequest {
            type_name: "memo".into(),
            input_properties: props(json!({"initialize_with": {"a": 1}})),
            is_stateful: true,
        });
        assert_eq!(
            create.to_line(),
            r#"{"createResourceRequest":{"type":"memo","inputProperties":{"initialize_with":{"a":1}},"isStateful":true}}"#
        );
        let update = Request::UpdateResourceRequest(UpdateResourceRequest {
            resource: ExtantResource {
                type_name: "exec".into(),
                input_properties: props(json!({"args": ["a"]})),
                output_properties: props(json!({"stdout": "a\n"})),
            },
            input_properties: props(json!({"args": ["b"]})),
        });
        assert_eq!(
            update.to_line(),
            r#"{"updateResourceRequest":{"resource":{"type":"exec","inputProperties":{"args":["a"]},"outputProperties":{"stdout":"a\n"}},"inputProperties":{"args":["b"]}}}"#
        );
        assert!(!create.to_line().contains('\n') && !update.to_line().contains('\n'));
    }

    #[test]
    fn responses_are_read_strictly() {
        let ok = parse_response(
            r#"{"createResourceResponse":{"outputProperties":{"value":{"a":1}}}}"#,
            "createResourceResponse",
        );
        assert_eq!(
            ok,
            Ok(Response::Outputs {
                kind: "createResourceResponse",
                outputs: props(json!({"value": {"a": 1}}))
            })
        );
        assert_eq!(
            parse_response(
                r#"{"errorResponse":{"message":"boom\nStack backtrace: ..."}}"#,
                "updateResourceResponse"
            ),
            Ok(Response::Error {
                message: "boom\nStack backtrace: ...".into()
            })
        );
        let err = |line: &str| {
            parse_response(line, "createResourceResponse")
                .unwrap_err()
                .to_string()
        };
        assert!(err("hello").starts_with("a line that is not JSON"));
        assert_eq!(
            err("[1]"),
            "JSON array, where a message is an object with exactly one key naming its type"
        );
        assert!(err(r#"{"a":{},"b":{}}"#).starts_with("an object with 2 keys"));
        assert_eq!(
            err(r#"{"fooResponse":{}}"#),
            r#"a response of unknown type "fooResponse""#
        );
        assert_eq!(
            err(r#"{"updateResourceResponse":{"outputProperties":{}}}"#),
            "an unexpected updateResourceResponse"
        );
        assert_eq!(
            err(r#"{"stateResourceReadResponse":{"state":{}}}"#),
            "an unexpected stateResourceReadResponse"
        );
        assert!(err(r#"{"createResourceResponse":{}}"#)
            .starts_with("a malformed createResourceResponse: missing field `outputProperties`"));
        assert!(err(r#"{"createResourceResponse":{"outputProperties":[]}}"#)
            .starts_with("a malformed createResourceResponse: invalid type"));
        assert!(err(r#"{"errorResponse":{"msg":"x"}}"#).starts_with("a malformed errorResponse"));
    }
}
