//! Stage 13, `invoke`: the only place a token is minted; the callable is invoked once with the
//! final arguments, a panic caught. Its answer goes to `handlers`.

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

use serde_json::Value;
use warden_contracts::Stage;

use super::{Flow, Run};
use crate::token::InvocationToken;
use crate::unwind::caught;

pub(crate) async fn invoke(run: &mut Run<'_>) -> Flow {
    let plan = run.plan(Stage::Invoke)?;
    run.trace.ran(Stage::Invoke);
    // Handlers see the arguments the call ran with; without handlers they are moved, not
    // copied.
    let keep_args = !(plan.post.is_empty() && plan.on_error.is_empty());
    let call_args = if keep_args {
        Value::Object(run.args.clone())
    } else {
        Value::Object(std::mem::take(&mut run.args))
    };
    let token = InvocationToken::mint(
        run.request.request_id().clone(),
        plan.entry.descriptor.name(),
    );
    run.progress.invoked.store(true, Ordering::Release);
    run.result = Some(caught!(plan.entry.tool.invoke(token, call_args)));
    ControlFlow::Continue(())
}
