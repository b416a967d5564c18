//! Stage 1, `resolve`: the registry resolves the requested name (canonical or alias, exact
//! case, optional version) to its entry; an unknown action is denied (`unknown_action`).

use std::ops::ControlFlow;

use warden_contracts::{DecisionReason, ReasonCode, Stage};

use super::{Flow, Run};

pub(crate) async fn resolve(run: &mut Run<'_>) -> Flow {
    run.trace.ran(Stage::Resolve);
    match run.exec.registry.entry(run.request.action()) {
        Ok(entry) => {
            run.trace.allow(
                Stage::Resolve,
                "registry",
                entry.descriptor.name(),
                ReasonCode::UnknownAction,
            );
            let _ = run.entry.set(entry);
            ControlFlow::Continue(())
        }
        Err(e) => run.refuse(
            Stage::Resolve,
            DecisionReason::new(ReasonCode::UnknownAction, e.to_string()),
            "registry",
            false,
        ),
    }
}
