//! The built-in tools (`read`, `write`, `edit`, `list`, `bash`), each a callable that only the executor can invoke.
//!
//! **Invariant:** every effect of a built-in tool happens inside its `invoke`, reached only through the executor.
//!
//! **Must never:** run anything except through the executor's callable trait and the selected effect backend.
#![forbid(unsafe_code)]
