//! Stage 10, `revalidate`: when anything changed the arguments (a security hook's replacement,
//! a transform), the schema again (`denied` / `transform`); skipped, with that fact reported,
//! when nothing did.

use std::ops::ControlFlow;

use warden_contracts::{DecisionReason, ReasonCode, Stage};

use super::{Flow, Run, validate};

pub(crate) async fn revalidate(run: &mut Run<'_>) -> Flow {
    if !run.changed {
        run.trace.skipped(Stage::Revalidate, "arguments unchanged");
        return ControlFlow::Continue(());
    }
    run.trace.ran(Stage::Revalidate);
    let plan = run.plan(Stage::Revalidate)?;
    if let Err(message) = validate::check(&plan.entry, &mut run.args) {
        return run.refuse(
            Stage::Revalidate,
            DecisionReason::new(
                ReasonCode::Transform,
                format!("transformed arguments fail the schema: {message}"),
            ),
            "schema",
            false,
        );
    }
    run.trace.allow(
        Stage::Revalidate,
        "schema",
        "transformed arguments match the schema",
        ReasonCode::Transform,
    );
    ControlFlow::Continue(())
}
