//! Work counters, for the tests that hold every input to linear cost
//! (crates/harness/tests/linear.rs): with the test-only feature `work-counters`, the steps of
//! a decision and a parse that cost without allocating (a probe of the rule index, hashed
//! whole; a candidate rule tried; a step of the shell parser; a scan of a policy's text for a
//! line) add to a per-thread count, which `measure` reads. Without the feature (every build
//! that ships) there is no counter and `add` compiles to nothing, so nothing shared is ever
//! written on the decision path.

#[cfg(feature = "work-counters")]
thread_local! {
    static UNITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `units` of work on this thread (nothing without the feature).
#[inline(always)]
pub(crate) fn add(units: usize) {
    #[cfg(feature = "work-counters")]
    UNITS.with(|u| u.set(u.get().saturating_add(units as u64)));
    #[cfg(not(feature = "work-counters"))]
    let _ = units;
}

/// Runs `f` and returns its result with the units of work it counted on this thread.
#[cfg(feature = "work-counters")]
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = UNITS.with(std::cell::Cell::get);
    let out = f();
    let after = UNITS.with(std::cell::Cell::get);
    (out, after - before)
}
