//! The shared shell corpus through `warden check` (issue 4).
