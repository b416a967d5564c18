//! `warden policy export` and `warden policy import`: a Warden policy as a provider's own
//! permission rules, and Claude Code settings as a Warden policy, each with a report of what
//! translated exactly, approximately (always stricter) or not at all. The translations are
//! `warden-harness` functions; this module reads and writes files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::json;
use warden_harness::TranslationReport;
use warden_harness::claude_code::{self, SettingsFile, SettingsScope};
use warden_harness::export::{self, Target};
use warden_policy::Format;

use crate::error::CliError;
use crate::{OutputFormat, load};

/// Export targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportTarget {
    /// Claude Code settings.json `permissions`.
    ClaudeCode,
    /// Codex `.rules` (prefix_rule).
    Codex,
    /// Gemini CLI policy TOML.
    Gemini,
}

/// Import sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ImportSource {
    /// Claude Code settings files.
    ClaudeCode,
}

/// `warden policy export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The provider to export to.
    #[arg(long, value_enum)]
    to: ExportTarget,
    #[command(flatten)]
    policy: crate::PolicyArgs,
    /// Write the exported file here and the report to stdout (default: the file to stdout,
    /// the report to stderr).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The report's format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
}

/// `warden policy import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The provider to import from.
    #[arg(long, value_enum)]
    from: ImportSource,
    /// Settings files: managed-settings.json, .claude/settings.json, .claude/settings.local.json,
    /// ~/.claude/settings.json (the scope comes from the name and place; `SCOPE=PATH` names it:
    /// managed, local, project or user).
    #[arg(value_name = "SETTINGS.json", required = true)]
    files: Vec<String>,
    /// Write the policy here and the report to stdout (default: the policy to stdout, the
    /// report to stderr).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The report's format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
}

fn report_text(
    report: &TranslationReport,
    format: OutputFormat,
    head: serde_json::Value,
) -> Result<String, CliError> {
    Ok(match format {
        OutputFormat::Text => report.to_text(),
        OutputFormat::Json => {
            let mut v = serde_json::to_value(report).map_err(|e| CliError::Io(e.into()))?;
            if let (Some(o), Some(h)) = (v.as_object_mut(), head.as_object()) {
                for (k, val) in h {
                    o.insert(k.clone(), val.clone());
                }
            }
            format!("{v}\n")
        }
    })
}

/// Writes `text` to `--out` (report to stdout) or stdout (report to stderr).
fn deliver(
    out: &mut impl Write,
    file: Option<&Path>,
    text: &str,
    report: &str,
) -> Result<(), CliError> {
    match file {
        Some(path) => {
            std::fs::write(path, text)
                .map_err(|e| CliError::Input(format!("{}: cannot write: {e}", path.display())))?;
            out.write_all(report.as_bytes())?;
        }
        None => {
            out.write_all(text.as_bytes())?;
            eprint!("{report}");
        }
    }
    Ok(())
}

pub(crate) fn run_export(a: &ExportArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let snapshot = a.policy.snapshot()?;
    let target = match a.to {
        ExportTarget::ClaudeCode => Target::ClaudeCode,
        ExportTarget::Codex => Target::Codex,
        ExportTarget::Gemini => Target::Gemini,
    };
    let exported = export::export(&snapshot, target).map_err(|e| CliError::Input(e.to_string()))?;
    let head = json!({
        "target": target.name(),
        "policy_digest": snapshot.digest().as_str(),
        "file": a.out.as_ref().map(|p| p.display().to_string()),
    });
    let report = report_text(&exported.report, a.format, head)?;
    deliver(out, a.out.as_deref(), &exported.text, &report)?;
    Ok(ExitCode::SUCCESS)
}

fn settings_file(arg: &str, home: Option<&Path>) -> Result<SettingsFile, CliError> {
    let (named, path) = match arg.split_once('=') {
        Some((scope, path)) if ["managed", "local", "project", "user"].contains(&scope) => {
            let s = match scope {
                "managed" => SettingsScope::Managed,
                "local" => SettingsScope::Local,
                "project" => SettingsScope::Project,
                _ => SettingsScope::User,
            };
            (Some(s), path)
        }
        _ => (None, arg),
    };
    let path = load::absolute(Path::new(path))?;
    let scope = named
        .or_else(|| SettingsScope::of_path(&path, home))
        .ok_or_else(|| {
            CliError::Input(format!(
                "{}: cannot tell its scope: Claude Code settings are managed-settings.json, settings.json or settings.local.json (or name it: project=PATH)",
                path.display()
            ))
        })?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| CliError::Input(format!("{}: cannot read: {e}", path.display())))?;
    Ok(SettingsFile { scope, path, text })
}

pub(crate) fn run_import(a: &ImportArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let ImportSource::ClaudeCode = a.from;
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let files = a
        .files
        .iter()
        .map(|f| settings_file(f, home.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let import =
        claude_code::import_settings(&files).map_err(|e| CliError::Input(e.to_string()))?;
    // The result must build: every translated rule compiles.
    let env = match &a.out {
        Some(p) => load::path_env(Some(p), None)?,
        None => load::path_env(Some(Path::new("imported.toml")), None)?,
    };
    claude_code::check_import(&import, env).map_err(|e| CliError::Input(e.to_string()))?;
    let body = import.policy.write(Format::Toml)?;
    let mut text = String::from("# Imported by `warden policy import --from claude-code` from:\n");
    for f in &files {
        text.push_str(&format!("#   {} ({})\n", f.path.display(), f.scope.name()));
    }
    text.push('\n');
    text.push_str(&body);
    let head = json!({
        "from": "claude-code",
        "file": a.out.as_ref().map(|p| p.display().to_string()),
    });
    let report = report_text(&import.report, a.format, head)?;
    deliver(out, a.out.as_deref(), &text, &report)?;
    Ok(ExitCode::SUCCESS)
}
