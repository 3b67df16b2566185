//! The SDK interceptors: one counts every request attempt and logs the failed ones (the SDK
//! retries silently), one captures a header the SDK does not model (COS's CRC-64).

use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

use crate::store::Counters;

/// Counts every attempt of every request, and the failed ones by kind, and says so in the log:
/// the SDK retries transient failures silently, an operator wants to see them.
#[derive(Debug)]
pub(super) struct CountAttempts(pub(super) Arc<Counters>);

impl Intercept for CountAttempts {
    fn name(&self) -> &'static str {
        "CountAttempts"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        Counters::bump(&self.0.attempts);
        if let Some(counter) = cfg
            .load::<aws_smithy_runtime_api::client::orchestrator::Metadata>()
            .and_then(|m| self.0.operation(m.name()))
        {
            Counters::bump(counter);
        }
        let status = context.response().map(|r| r.status().as_u16());
        let error = context.output_or_error().and_then(Result::err);
        let (counter, kind) = match error {
            Some(e)
                if e.is_timeout_error()
                    || e.as_connector_error().is_some_and(|c| c.is_timeout()) =>
            {
                (&self.0.timeouts, "timeout")
            }
            Some(e) if e.is_connector_error() || e.is_response_error() => {
                (&self.0.connection_errors, "connection error")
            }
            _ if status.is_some_and(|s| s >= 500 || s == 429) => {
                (&self.0.server_errors, "server error")
            }
            _ => return Ok(()),
        };
        Counters::bump(counter);
        let detail = error.map(|e| super::error::in_words(e));
        tracing::warn!(
            status,
            detail = detail.as_deref().unwrap_or_default(),
            "S3 request attempt failed ({kind}); the SDK retries it with backoff while attempts remain"
        );
        Ok(())
    }
}

/// Captures COS's `x-cos-hash-crc64ecma` response header, which the SDK does not model.
#[derive(Debug, Default, Clone)]
pub(super) struct CaptureCosCrc(Arc<Mutex<Option<String>>>);

impl CaptureCosCrc {
    /// The header's value as the CRC-64 it states (`None`: not sent, or not a number).
    pub(super) fn crc64ecma(&self) -> Option<u64> {
        self.0
            .lock()
            .expect("not poisoned")
            .as_deref()
            .and_then(|v| v.parse().ok())
    }
}

impl Intercept for CaptureCosCrc {
    fn name(&self) -> &'static str {
        "CaptureCosCrc"
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let value = context
            .response()
            .headers()
            .get("x-cos-hash-crc64ecma")
            .map(str::to_string);
        *self.0.lock().expect("not poisoned") = value;
        Ok(())
    }
}
