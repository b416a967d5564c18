//! Ungoverned idempotency: this process's memory of keyed requests (governed keys are durable
//! in the evidence store, docs/executor.md "Idempotency").
//!
//! A key is scoped to the trusted principal, scope and action. The `bind_context` stage
//! reserves it ([`Table::reserve`]); the reservation outlives the stage pipeline (which a
//! cancellation or deadline may drop) and is completed with the request's outcome, or released
//! when dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};
use warden_contracts::ExecutionOutcome;

/// The idempotency key of a request, scoped to the trusted principal, scope and action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct IdemKey {
    pub(crate) principal: String,
    pub(crate) scope: String,
    pub(crate) action: String,
    pub(crate) key: String,
}

enum IdemState {
    InFlight,
    Done(Box<(Map<String, Value>, ExecutionOutcome)>),
}

/// What a reservation found instead of a free key.
pub(crate) enum Taken {
    /// The key's earlier call, with the same arguments: its outcome, replayed.
    Replay(Box<ExecutionOutcome>),
    /// The key was used with other arguments.
    OtherArguments,
    /// A request with this key is in flight.
    InFlight,
}

/// The executor's table of keys.
#[derive(Clone, Default)]
pub(crate) struct Table(Arc<Mutex<HashMap<IdemKey, IdemState>>>);

impl Table {
    /// Reserves `key` for a call with `args`, or says why it is taken.
    pub(crate) fn reserve(
        &self,
        key: IdemKey,
        args: &Map<String, Value>,
    ) -> Result<IdemGuard, Taken> {
        let mut table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match table.get(&key) {
            Some(IdemState::Done(done)) => {
                let (arguments, outcome) = &**done;
                return Err(if arguments == args {
                    Taken::Replay(Box::new(outcome.clone()))
                } else {
                    Taken::OtherArguments
                });
            }
            Some(IdemState::InFlight) => return Err(Taken::InFlight),
            None => {}
        }
        table.insert(key.clone(), IdemState::InFlight);
        Ok(IdemGuard {
            table: self.clone(),
            key: Some(key),
            arguments: args.clone(),
        })
    }
}

/// Holds an in-flight idempotency reservation; released on drop unless completed.
pub(crate) struct IdemGuard {
    table: Table,
    key: Option<IdemKey>,
    arguments: Map<String, Value>,
}

impl IdemGuard {
    /// Records the request's outcome under its key.
    pub(crate) fn complete(mut self, outcome: &ExecutionOutcome) {
        let Some(key) = self.key.take() else { return };
        let mut table = self.table.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Only outcomes whose call may have had an effect are recorded: replaying them must not
        // run the tool again. A call that never started may simply run when retried.
        if outcome.call_executed() == Some(false) {
            table.remove(&key);
        } else {
            table.insert(
                key,
                IdemState::Done(Box::new((
                    std::mem::take(&mut self.arguments),
                    outcome.clone(),
                ))),
            );
        }
    }
}

impl Drop for IdemGuard {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.table
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
        }
    }
}
