//! Stage 2, `validate`: the request's arguments against the tool's input schema (compiled at
//! registration); no user code runs. A mismatch is denied (`invalid_arguments`, naming the
//! JSON pointer).

use std::ops::ControlFlow;

use serde_json::{Map, Value};
use warden_contracts::{DecisionReason, ReasonCode, Stage};

use super::{Flow, Run};
use crate::registry::Entry;

pub(crate) async fn validate(run: &mut Run<'_>) -> Flow {
    run.trace.ran(Stage::Validate);
    let entry = run.entry(Stage::Validate)?;
    run.args = run.request.arguments().clone();
    if let Err(message) = check(entry, &mut run.args) {
        return run.refuse(
            Stage::Validate,
            DecisionReason::new(
                ReasonCode::InvalidArguments,
                format!(
                    "arguments of `{}` fail its schema: {message}",
                    entry.descriptor.name()
                ),
            ),
            "schema",
            false,
        );
    }
    run.trace.allow(
        Stage::Validate,
        "schema",
        "arguments match the schema",
        ReasonCode::InvalidArguments,
    );
    ControlFlow::Continue(())
}

/// Validates `args` against the entry's schema without copying them (also `revalidate`).
pub(crate) fn check(entry: &Entry, args: &mut Map<String, Value>) -> Result<(), String> {
    let value = Value::Object(std::mem::take(args));
    let result = if entry.validator.is_valid(&value) {
        Ok(())
    } else {
        match entry.validator.validate(&value) {
            Ok(()) => Ok(()),
            Err(e) => {
                let path = e.instance_path().to_string();
                Err(if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                })
            }
        }
    };
    if let Value::Object(m) = value {
        *args = m;
    }
    result
}
