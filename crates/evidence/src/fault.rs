//! Fault injection: named points compiled in only with the `fault-injection` feature (test
//! builds), selected at run time by `WARDEN_EVIDENCE_FAULT`.
//!
//! `WARDEN_EVIDENCE_FAULT=<point>[@<n>][:<action>]` arms one point: its `n`-th hit (default 1)
//! in this process triggers `action`:
//!
//! - `hang` (default): write the point's name to the file named by `WARDEN_EVIDENCE_FAULT_MARKER`
//!   (if set) and to stderr, then block forever, so a test can SIGKILL the process exactly there;
//! - `error`: make the operation at that point fail, as an I/O error would.
//!
//! Without the feature every point is an inline no-op returning `Ok(())`; the variable is never
//! read. The `test-util` feature adds the crash harness that arms these points in a child
//! process (`crate::test_util`).

/// The variable that arms a point: `<point>[@<n>][:<action>]`.
pub const VAR: &str = "WARDEN_EVIDENCE_FAULT";

/// The variable naming the file a `hang` point appends its name to before it blocks.
pub const MARKER_VAR: &str = "WARDEN_EVIDENCE_FAULT_MARKER";

/// Every fault point, in the order an operation meets them (docs/evidence.md).
pub const POINTS: [&str; 7] = [
    "governed.after_append",
    "store.before_commit",
    "store.after_commit",
    "governed.before_invoke",
    "governed.after_invoke",
    "projection.before_commit",
    "projection.after_commit",
];

/// An injected failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected(pub &'static str);

#[cfg(feature = "fault-injection")]
mod imp {
    use std::io::Write as _;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::Injected;

    struct Armed {
        point: String,
        nth: u64,
        error: bool,
    }

    static HITS: AtomicU64 = AtomicU64::new(0);
    static ARMED: Mutex<Option<Option<Armed>>> = Mutex::new(None);

    fn armed() -> Option<(String, u64, bool)> {
        let mut guard = ARMED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = guard.get_or_insert_with(|| {
            let spec = std::env::var(super::VAR).ok()?;
            let (rest, action) = match spec.split_once(':') {
                Some((r, a)) => (r.to_owned(), a.to_owned()),
                None => (spec.clone(), "hang".to_owned()),
            };
            let (point, nth) = match rest.split_once('@') {
                Some((p, n)) => (p.to_owned(), n.parse().unwrap_or(1)),
                None => (rest, 1),
            };
            Some(Armed {
                point,
                nth,
                error: action == "error",
            })
        });
        slot.as_ref().map(|a| (a.point.clone(), a.nth, a.error))
    }

    pub(crate) fn hit(point: &'static str) -> Result<(), Injected> {
        let Some((armed, nth, error)) = armed() else {
            return Ok(());
        };
        if armed != point {
            return Ok(());
        }
        let n = HITS.fetch_add(1, Ordering::SeqCst) + 1;
        if n != nth {
            return Ok(());
        }
        tracing::warn!(point, n, "fault injected");
        if error {
            return Err(Injected(point));
        }
        if let Ok(marker) = std::env::var(super::MARKER_VAR)
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(marker)
        {
            let _ = writeln!(f, "{point}");
            let _ = f.sync_all();
        }
        let _ = writeln!(std::io::stderr(), "WARDEN-FAULT-REACHED {point}");
        loop {
            std::thread::park();
        }
    }
}

/// Passes fault point `point`: a no-op unless it is armed (test builds only).
#[inline]
pub(crate) fn point(point: &'static str) -> Result<(), Injected> {
    #[cfg(feature = "fault-injection")]
    {
        imp::hit(point)
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = point;
        Ok(())
    }
}
