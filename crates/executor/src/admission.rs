//! Capacity admission (stage `admit`), separate from security: per-action and global concurrency
//! limits and token-bucket rates, implementing the contracts [`Capacity`] port. When a limit is
//! full the answer is "not now" (`Deferred { retry_at }`), never "no", and nothing has started.
//!
//! Like tower's `poll_ready`, admission reserves before the call and releases on drop: a
//! [`CapacityLease`] holds the reserved slots, and dropping it (success, failure, a panic in the
//! tool, cancellation) gives them back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use warden_contracts::{Capacity, CapacityFull, CapacityLease, Timestamp};

use crate::error::ExecutorError;

pub use warden_contracts::Clock;
pub use warden_evidence::SystemClock;

/// A concurrency limit: at most `max` calls hold a slot at once.
#[derive(Debug)]
struct Slots {
    name: String,
    max: usize,
    used: AtomicUsize,
}

impl Slots {
    fn try_take(self: &Arc<Self>) -> Option<SlotGuard> {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            if cur >= self.max {
                return None;
            }
            match self
                .used
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Some(SlotGuard(self.clone())),
                Err(now) => cur = now,
            }
        }
    }
}

/// Holds one slot; gives it back on drop.
#[derive(Debug)]
struct SlotGuard(Arc<Slots>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.0.used.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A token bucket: `burst` tokens, refilled at `per_second`.
#[derive(Debug)]
struct Bucket {
    name: String,
    burst: f64,
    per_second: f64,
    state: Mutex<(f64, u64)>,
}

impl Bucket {
    fn new(name: String, per_second: f64, burst: u32) -> Result<Self, ExecutorError> {
        if !(per_second.is_finite() && per_second > 0.0) || burst == 0 {
            return Err(ExecutorError::InvalidLimit(format!(
                "{name}: a rate needs a positive rate and a burst of at least 1"
            )));
        }
        Ok(Self {
            name,
            burst: f64::from(burst),
            per_second,
            state: Mutex::new((f64::from(burst), 0)),
        })
    }

    /// Takes a token, or says when one will be there.
    fn try_take(&self, now: Timestamp) -> Result<(), Timestamp> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (tokens, last) = &mut *state;
        let now_ms = now.unix_millis();
        if now_ms > *last {
            #[allow(clippy::cast_precision_loss)] // milliseconds fit f64 for any real clock
            let elapsed = (now_ms - *last) as f64 / 1000.0;
            *tokens = (*tokens + elapsed * self.per_second).min(self.burst);
            *last = now_ms;
        } else if *last == 0 {
            *last = now_ms;
        }
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            let wait_ms = ((1.0 - *tokens) / self.per_second * 1000.0).ceil();
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // positive, bounded
            let wait_ms = wait_ms.max(1.0) as u64;
            Err(Timestamp(now_ms.saturating_add(wait_ms)))
        }
    }
}

/// Concurrency and rate limits, global and per action (by canonical name). An action with no
/// limit of its own is bounded only by the global ones and the default per-action limit.
///
/// ```
/// use warden_contracts::{Capacity, Timestamp};
/// use warden_executor::Limits;
/// let limits = Limits::new().max_concurrent(1)?;
/// let lease = limits.try_acquire("bash", Timestamp(0)).unwrap();
/// assert!(limits.try_acquire("read", Timestamp(0)).is_err(), "the global slot is taken");
/// drop(lease);
/// assert!(limits.try_acquire("read", Timestamp(0)).is_ok());
/// assert_eq!(limits.in_flight(), 0);
/// # Ok::<(), warden_executor::ExecutorError>(())
/// ```
#[derive(Debug, Default)]
pub struct Limits {
    global: Option<Arc<Slots>>,
    per_action: HashMap<String, Arc<Slots>>,
    default_per_action: Option<usize>,
    defaulted: Mutex<HashMap<String, Arc<Slots>>>,
    global_rate: Option<Bucket>,
    rates: HashMap<String, Bucket>,
}

impl Limits {
    /// No limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `max` calls at once, across all actions.
    pub fn max_concurrent(mut self, max: usize) -> Result<Self, ExecutorError> {
        self.global = Some(Arc::new(Self::slots("global concurrency", max)?));
        Ok(self)
    }

    /// At most `max` calls of `action` at once.
    pub fn max_concurrent_for(
        mut self,
        action: impl Into<String>,
        max: usize,
    ) -> Result<Self, ExecutorError> {
        let action = action.into();
        let slots = Self::slots(&format!("concurrency of {action}"), max)?;
        self.per_action.insert(action, Arc::new(slots));
        Ok(self)
    }

    /// At most `max` calls at once of each action without a limit of its own.
    pub fn max_concurrent_per_action(mut self, max: usize) -> Result<Self, ExecutorError> {
        Self::slots("per-action concurrency", max)?;
        self.default_per_action = Some(max);
        Ok(self)
    }

    /// A global token bucket: `per_second` calls on average, bursts of `burst`.
    pub fn rate(mut self, per_second: f64, burst: u32) -> Result<Self, ExecutorError> {
        self.global_rate = Some(Bucket::new("global rate".into(), per_second, burst)?);
        Ok(self)
    }

    /// A token bucket for `action`.
    pub fn rate_for(
        mut self,
        action: impl Into<String>,
        per_second: f64,
        burst: u32,
    ) -> Result<Self, ExecutorError> {
        let action = action.into();
        let bucket = Bucket::new(format!("rate of {action}"), per_second, burst)?;
        self.rates.insert(action, bucket);
        Ok(self)
    }

    fn slots(name: &str, max: usize) -> Result<Slots, ExecutorError> {
        if max == 0 {
            return Err(ExecutorError::InvalidLimit(format!(
                "{name}: a concurrency limit must be at least 1"
            )));
        }
        Ok(Slots {
            name: name.to_owned(),
            max,
            used: AtomicUsize::new(0),
        })
    }

    /// Calls holding a global slot (or, without a global limit, the sum over action limits).
    pub fn in_flight(&self) -> usize {
        match &self.global {
            Some(g) => g.used.load(Ordering::Acquire),
            None => {
                let own: usize = self
                    .per_action
                    .values()
                    .map(|s| s.used.load(Ordering::Acquire))
                    .sum();
                let defaulted: usize = self
                    .defaulted
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .values()
                    .map(|s| s.used.load(Ordering::Acquire))
                    .sum();
                own + defaulted
            }
        }
    }

    /// Calls of `action` holding a per-action slot.
    pub fn in_flight_for(&self, action: &str) -> usize {
        if let Some(s) = self.per_action.get(action) {
            return s.used.load(Ordering::Acquire);
        }
        self.defaulted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(action)
            .map_or(0, |s| s.used.load(Ordering::Acquire))
    }

    fn action_slots(&self, action: &str) -> Result<Option<Arc<Slots>>, ExecutorError> {
        if let Some(s) = self.per_action.get(action) {
            return Ok(Some(s.clone()));
        }
        let Some(max) = self.default_per_action else {
            return Ok(None);
        };
        let mut map = self
            .defaulted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = map.get(action) {
            return Ok(Some(s.clone()));
        }
        let slots = Arc::new(Self::slots(&format!("concurrency of {action}"), max)?);
        map.insert(action.to_owned(), slots.clone());
        Ok(Some(slots))
    }

    /// Whether any limit is configured (an executor without limits skips the lease).
    pub fn is_unlimited(&self) -> bool {
        self.global.is_none()
            && self.per_action.is_empty()
            && self.default_per_action.is_none()
            && self.global_rate.is_none()
            && self.rates.is_empty()
    }
}

impl Capacity for Limits {
    fn try_acquire(&self, action: &str, now: Timestamp) -> Result<CapacityLease, CapacityFull> {
        if self.is_unlimited() {
            return Ok(CapacityLease::unlimited());
        }
        let full = |slots: &Slots| CapacityFull {
            reason: format!("{} is full ({} in flight)", slots.name, slots.max),
            retry_at: None,
        };
        let mut guards: Vec<SlotGuard> = Vec::with_capacity(2);
        if let Some(g) = &self.global {
            guards.push(g.try_take().ok_or_else(|| full(g))?);
        }
        let own = self.action_slots(action).map_err(|e| CapacityFull {
            reason: e.to_string(),
            retry_at: None,
        })?;
        if let Some(s) = own {
            guards.push(s.try_take().ok_or_else(|| full(&s))?);
        }
        // Rates last, so a full concurrency limit does not burn a token. The slot guards are
        // dropped (released) if a rate refuses.
        for bucket in self.global_rate.iter().chain(self.rates.get(action)) {
            if let Err(retry_at) = bucket.try_take(now) {
                return Err(CapacityFull {
                    reason: format!("{} exceeded", bucket.name),
                    retry_at: Some(retry_at),
                });
            }
        }
        Ok(CapacityLease::new(guards))
    }
}
