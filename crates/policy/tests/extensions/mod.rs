//! Policy extensions: presets, grants, hints (offers, batches and confinement run
//! in the decisions.json corpus test).

mod grants;
mod hints;
mod modes;
mod presets;
