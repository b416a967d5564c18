//! Harness: compiles one neutral `HarnessSpec` into Claude Code, Codex and Gemini CLI settings and reports, per control, what the provider enforces, degrades or cannot do.
//!
//! **Invariant:** every requested control appears exactly once in the capability report as enforced, degraded or unsupported.
//!
//! **Must never:** claim a control the provider does not enforce.
//!
//! What is here today is the provider bridge for agents that run tools themselves and ask
//! Warden first:
//!
//! - [`claude_code`]: the Claude Code hook protocol (an event in, a decision out), the tool
//!   mapping from Claude Code's tools to Warden's ([`claude_code::TOOL_MAPPING`]), the
//!   `settings.json` fragment that installs the hook, and the import of Claude Code's own
//!   permission rules as ranked Warden sources.
//! - [`transcript`]: the calls in agent transcripts (Claude Code and Codex sessions, Warden calls
//!   files), mapped exactly as the hook maps them, for `warden replay`.
//! - [`replay`]: what a replay counts (per decision, per rule, rules that never fired, calls no
//!   rule covered).
//! - [`export`]: a Warden policy translated into Claude Code `permissions`, Codex `.rules` and
//!   Gemini CLI policy TOML, with a [`TranslationReport`] of what translated exactly, what was approximated
//!   (always toward stricter) and what cannot be expressed.
//!
//! Key design decision: the mapping is one table used by both the hook and replay, so a replay
//! shows what the hook would have answered. Nothing here runs a tool or touches files; callers
//! read files and pass text in.
//!
//! ```
//! use warden_harness::claude_code;
//! let call = claude_code::to_call(
//!     "Read",
//!     &serde_json::json!({"file_path": "src/main.rs"}),
//!     Some(std::path::Path::new("/repo")),
//! );
//! assert_eq!(call.tool, "read");
//! assert_eq!(call.args["path"], "src/main.rs");
//! assert_eq!(call.cwd.as_deref(), Some(std::path::Path::new("/repo")));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod claude_code;
pub mod codex;
mod error;
pub mod export;
pub mod gemini;
pub mod hook;
pub mod launch;
pub mod replay;
mod report;
pub mod spec;
pub mod transcript;

pub use error::HarnessError;
pub use report::{Entry, Status, TranslationReport};
