//! The ephemeral resource calls of [`GrpcProvider`]: validate, open, renew, close.
//!
//! Owns: encoding those four requests and decoding their answers (the messages are identical in
//! tfplugin5 and tfplugin6, so one sequence serves both; only the method paths differ). Not:
//! when to open, renew or close (the engine's `ephemeral` module), nor keeping the values.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use protobuf::MessageField;

use super::super::protocol;
use super::super::wire::tfplugin6 as pb;
use super::GrpcProvider;
use crate::diag::{Diagnostic, Diagnostics};
use crate::provider::{CallResult, OpenedEphemeral, RenewedEphemeral};
use crate::value::{Type, Value};

/// A wire timestamp as a time; absent or before the epoch is "none".
fn time_of(t: &MessageField<pb::Timestamp>) -> Option<SystemTime> {
    let t = t.as_ref()?;
    let secs = u64::try_from(t.seconds).ok()?;
    let nanos = u32::try_from(t.nanos).unwrap_or(0).min(999_999_999);
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

impl GrpcProvider {
    fn ephemeral_type(&self, type_name: &str) -> CallResult<Type> {
        self.schema
            .ephemeral_resource(type_name)
            .map(|s| s.block.implied_type())
            .ok_or_else(|| {
                Diagnostic::error(format!(
                    "provider {} has no ephemeral resource type {type_name:?}",
                    self.name
                ))
                .into()
            })
    }

    pub(super) fn validate_ephemeral_call(
        &self,
        type_name: &str,
        config: &Value,
    ) -> CallResult<Diagnostics> {
        let ty = self.ephemeral_type(type_name)?;
        let mut req = pb::validate_ephemeral_resource_config::Request::new();
        req.type_name = type_name.to_string();
        req.config = self.encode(config, &ty, "ephemeral resource configuration")?;
        let resp: pb::validate_ephemeral_resource_config::Response =
            self.call(self.methods.validate_ephemeral_config, &req)?;
        Ok(protocol::diagnostics(&resp.diagnostics))
    }

    pub(super) fn open_ephemeral_call(
        &self,
        type_name: &str,
        config: &Value,
    ) -> CallResult<OpenedEphemeral> {
        let ty = self.ephemeral_type(type_name)?;
        let mut req = pb::open_ephemeral_resource::Request::new();
        req.type_name = type_name.to_string();
        req.config = self.encode(config, &ty, "ephemeral resource configuration")?;
        req.client_capabilities = Self::capabilities();
        let resp: pb::open_ephemeral_resource::Response =
            self.call(self.methods.open_ephemeral, &req)?;
        let diagnostics = protocol::diagnostics(&resp.diagnostics);
        let result = if diagnostics.has_errors() && resp.result.is_none() {
            Value::Null
        } else {
            self.decode(&resp.result, &ty, "ephemeral resource result")?
        };
        Ok(OpenedEphemeral {
            result,
            private: resp.private,
            renew_at: time_of(&resp.renew_at),
            diagnostics,
        })
    }

    pub(super) fn renew_ephemeral_call(
        &self,
        type_name: &str,
        private: Option<&[u8]>,
    ) -> CallResult<RenewedEphemeral> {
        let mut req = pb::renew_ephemeral_resource::Request::new();
        req.type_name = type_name.to_string();
        req.private = private.map(<[u8]>::to_vec);
        let resp: pb::renew_ephemeral_resource::Response =
            self.call(self.methods.renew_ephemeral, &req)?;
        Ok(RenewedEphemeral {
            private: resp.private,
            renew_at: time_of(&resp.renew_at),
            diagnostics: protocol::diagnostics(&resp.diagnostics),
        })
    }

    pub(super) fn close_ephemeral_call(
        &self,
        type_name: &str,
        private: Option<&[u8]>,
    ) -> CallResult<Diagnostics> {
        let mut req = pb::close_ephemeral_resource::Request::new();
        req.type_name = type_name.to_string();
        req.private = private.map(<[u8]>::to_vec);
        let resp: pb::close_ephemeral_resource::Response =
            self.call(self.methods.close_ephemeral, &req)?;
        Ok(protocol::diagnostics(&resp.diagnostics))
    }
}
