//! Policy extensions (issue 5): presets, grants, hints, offers, batches, confinement.

mod presets;
