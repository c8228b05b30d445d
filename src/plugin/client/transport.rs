//! A failed gRPC call explained: whether the provider crashed (with its crash output), did not
//! answer, or refused the call; and whether the provider was gone, which the printer reports
//! once per death (`diag::ProviderGone`).

use std::time::Duration;

use super::GrpcProvider;
use crate::diag::{Diagnostic, ProviderGone};

impl GrpcProvider {
    /// Explains a failed call, pulling in the provider's crash output when it died
    /// (`gone_before`: it was dead before the call was made).
    pub(super) fn transport_error(
        &self,
        path: &str,
        error: grpcio::Error,
        gone_before: bool,
    ) -> Diagnostic {
        let rpc = path.rsplit('/').next().unwrap_or(path);
        let (exited, tail, panicked) = match self.process.lock() {
            Ok(mut p) => {
                let exited = p.wait_exit(Duration::from_millis(300));
                (exited, p.stderr_tail(), p.panicked())
            }
            Err(_) => (None, String::new(), false),
        };
        let mut gone = false;
        let summary = match &error {
            grpcio::Error::RpcFailure(status) => match status.code() {
                grpcio::RpcStatusCode::UNAVAILABLE | grpcio::RpcStatusCode::CANCELLED
                    if exited.is_some() || panicked =>
                {
                    gone = true;
                    format!("provider {} crashed during {rpc}", self.name)
                }
                grpcio::RpcStatusCode::UNAVAILABLE => {
                    format!(
                        "provider {} did not respond to {rpc} (it may have crashed)",
                        self.name
                    )
                }
                grpcio::RpcStatusCode::UNIMPLEMENTED => {
                    format!("provider {} does not support {rpc}", self.name)
                }
                grpcio::RpcStatusCode::DEADLINE_EXCEEDED => {
                    format!("provider {} did not answer {rpc} in time", self.name)
                }
                code => format!(
                    "provider {} failed {rpc}: {code:?} {}",
                    self.name,
                    status.message()
                ),
            },
            other => format!("provider {} failed {rpc}: {other}", self.name),
        };
        let mut detail = String::new();
        if let Some(status) = exited {
            detail.push_str(&format!("The provider process exited ({status}).\n"));
        }
        if !tail.is_empty() {
            detail.push_str(if panicked {
                "Provider crash output:\n"
            } else {
                "Provider stderr (last lines):\n"
            });
            detail.push_str(&tail);
        }
        let mut diagnostic = Diagnostic::error(summary).with_detail(detail.trim_end());
        diagnostic.provider_gone = gone.then(|| ProviderGone {
            provider: self.name.clone(),
            operation: rpc == "ApplyResourceChange" && !gone_before,
        });
        diagnostic
    }
}
