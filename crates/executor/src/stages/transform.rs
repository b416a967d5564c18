//! Stage 9, `transform`: the user transforms, each on the current arguments (copies in, a new
//! mapping out); a failure denies (`transform`). A change is re-validated and re-authorized
//! (stages 10 and 11).

use std::ops::ControlFlow;

use warden_contracts::{DecisionReason, ReasonCode, Stage};

use super::{Flow, Run};

pub(crate) async fn transform(run: &mut Run<'_>) -> Flow {
    let plan = run.plan(Stage::Transform)?;
    if plan.transforms.is_empty() {
        run.trace.planned(plan, Stage::Transform);
        return ControlFlow::Continue(());
    }
    run.trace.ran(Stage::Transform);
    for t in &plan.transforms {
        let answer = t.transform(&run.view(plan, &run.args)).await;
        match answer {
            Ok(None) => {}
            Ok(Some(next)) => {
                if next != run.args {
                    run.args = next;
                    run.changed = true;
                }
            }
            Err(e) => {
                return run.refuse(
                    Stage::Transform,
                    DecisionReason::new(ReasonCode::Transform, format!("a transform failed: {e}")),
                    "transform",
                    false,
                );
            }
        }
    }
    ControlFlow::Continue(())
}
