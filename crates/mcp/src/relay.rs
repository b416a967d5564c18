//! What a proxied call carries past the executor to its server: where the server's progress
//! on it goes. The proxy sets it for the task that runs the call ([`scope`]); the client reads
//! it when it sends the request. Nothing here decides anything: a call without a relay runs
//! the same, its progress dropped.

use std::future::Future;

use tokio::sync::mpsc::UnboundedSender;

/// One `notifications/progress` from a server, without its token (the caller has its own).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    /// The progress so far.
    pub(crate) progress: f64,
    /// The total, if known.
    pub(crate) total: Option<f64>,
    /// What is happening.
    pub(crate) message: Option<String>,
}

tokio::task_local! {
    static PROGRESS: UnboundedSender<Progress>;
}

/// Runs `call` with its servers' progress sent to `to`.
pub(crate) async fn scope<F: Future>(to: UnboundedSender<Progress>, call: F) -> F::Output {
    PROGRESS.scope(to, call).await
}

/// Where the current task's call progress goes, if anywhere.
pub(crate) fn progress() -> Option<UnboundedSender<Progress>> {
    PROGRESS.try_with(Clone::clone).ok()
}
