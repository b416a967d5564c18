//! Harness: compiles one neutral `HarnessSpec` into Claude Code, Codex and Gemini CLI settings and reports, per control, what the provider enforces, degrades or cannot do.
//!
//! **Invariant:** every requested control appears exactly once in the capability report as enforced, degraded or unsupported.
//!
//! **Must never:** claim a control the provider does not enforce.
#![forbid(unsafe_code)]
