//! The crate's errors: configuration and registration errors (returned before anything runs) and
//! the approval loop's denial bound. Nothing that happens while executing a request is an error:
//! it is a typed `ExecutionOutcome`.

use warden_contracts::ExecutionOutcome;

/// A configuration, registration or resolution error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecutorError {
    /// A name (canonical or alias) is already taken, exactly or up to letter case.
    #[error("action name `{name}` collides with `{existing}` (of action `{owner}`)")]
    Collision {
        /// The name being registered.
        name: String,
        /// The registered name it collides with.
        existing: String,
        /// The canonical name of the action that holds it.
        owner: String,
    },
    /// A tool's input schema does not compile.
    #[error("action `{action}`: invalid input schema: {message}")]
    InvalidSchema {
        /// The action.
        action: String,
        /// The compiler's message.
        message: String,
    },
    /// No action answers to the name.
    #[error("unknown action `{name}`")]
    UnknownAction {
        /// The name asked for.
        name: String,
    },
    /// The action exists in another version.
    #[error("action `{name}` is version {registered}, not {requested}")]
    VersionMismatch {
        /// The name asked for.
        name: String,
        /// The version asked for.
        requested: String,
        /// The registered version.
        registered: String,
    },
    /// The executor was built without a policy evaluator: nothing would authorize a call.
    #[error("an executor needs a policy evaluator (fail closed: no policy, no execution)")]
    NoPolicy,
    /// Two policy evaluators pin the same snapshot digest.
    #[error("two policy evaluators pin the same snapshot {digest}")]
    DuplicatePolicy {
        /// The snapshot digest.
        digest: String,
    },
    /// The context names a policy snapshot this executor does not hold.
    #[error("no policy evaluator for snapshot {digest}")]
    UnknownPolicy {
        /// The snapshot digest the context names.
        digest: String,
    },
    /// An invalid limit (zero concurrency, a non-positive rate).
    #[error("invalid limit: {0}")]
    InvalidLimit(String),
    /// The profile asked for is not what the composition provides (a profile never claims
    /// more than its composition backs).
    #[error("runtime profile: {0}")]
    Profile(String),
}

/// Why an approval loop stopped instead of answering.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApprovalError {
    /// The reviewer's denial bound was reached (consecutive refusals, or too many in the
    /// window): the run should stop. Carries the outcome of the call that reached it.
    #[error(
        "reviewer denial bound reached: {consecutive} consecutive refusals, {in_window} in the last {window} reviews"
    )]
    DenialBound {
        /// Consecutive refusals when the bound was reached.
        consecutive: usize,
        /// Refusals within the window.
        in_window: usize,
        /// The window's size.
        window: usize,
        /// The refused call's outcome (a denial).
        outcome: Box<ExecutionOutcome>,
    },
    /// The new attempt could not be built (its request id or arguments are invalid).
    #[error("cannot build the approved attempt: {message}")]
    Attempt {
        /// What is invalid.
        message: String,
    },
    /// The outcome handed to the loop is not an escalation.
    #[error("outcome `{status}` is not an escalation: nothing to review")]
    NotEscalated {
        /// The outcome's status.
        status: &'static str,
    },
}
