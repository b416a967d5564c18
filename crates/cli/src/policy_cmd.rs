//! `warden policy compile`, `warden policy schema` and `warden policy describe`.

use std::io::Write;
use std::process::ExitCode;

use serde_json::{Value, json};

use crate::error::CliError;
use crate::{OutputFormat, PolicyArgs};

pub(crate) fn compile(
    a: &PolicyArgs,
    format: OutputFormat,
    out: &mut impl Write,
) -> Result<ExitCode, CliError> {
    let s = a.snapshot()?;
    match format {
        OutputFormat::Json => {
            let sources: Vec<_> = s
                .sources()
                .iter()
                .map(|src| {
                    json!({
                        "name": src.name,
                        "role": src.role.as_str(),
                        "rank": src.rank,
                        "trusted": src.trusted,
                        "path": src.path,
                        "hash": src.hash,
                        "rules": {"deny": src.rule_counts[0], "ask": src.rule_counts[1], "allow": src.rule_counts[2]},
                        "withheld": src.withheld,
                        "derived": src.derived,
                    })
                })
                .collect();
            let [deny, ask, allow] = s.rule_counts();
            let value = json!({
                "id": s.id(),
                "version": s.version(),
                "digest": s.digest().as_str(),
                "default": s.default_decision().as_str(),
                "default_from": s.default_origin(),
                "rules": {"deny": deny, "ask": ask, "allow": allow},
                "protected": s.protected(),
                "sources": sources,
            });
            writeln!(out, "{value}")?;
        }
        OutputFormat::Text => {
            writeln!(out, "policy  {} version {}", s.id(), s.version())?;
            writeln!(out, "digest  {}", s.digest())?;
            writeln!(
                out,
                "default {} (from {}; the strictest default applies)",
                s.default_decision(),
                s.default_origin()
            )?;
            for src in s.sources() {
                writeln!(
                    out,
                    "source  {} ({}, rank {}, {}): deny {}, ask {}, allow {}{}",
                    src.name,
                    src.role,
                    src.rank,
                    if src.trusted { "trusted" } else { "untrusted" },
                    src.rule_counts[0],
                    src.rule_counts[1],
                    src.rule_counts[2],
                    if src.withheld.is_empty() {
                        String::new()
                    } else {
                        format!(", {} allow rule(s) withheld", src.withheld.len())
                    }
                )?;
                // The counts are of compiled rules: say which ones no file lists.
                for d in &src.derived {
                    writeln!(
                        out,
                        "        {} {} (derived from {}: alias expansion)",
                        d.list.as_str(),
                        d.rule,
                        d.from
                    )?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn schema(out: &mut impl Write) -> Result<ExitCode, CliError> {
    let schema = warden_policy::policy_file_schema();
    let text = serde_json::to_string_pretty(&schema).map_err(|e| CliError::Io(e.into()))?;
    writeln!(out, "{text}")?;
    Ok(ExitCode::SUCCESS)
}

/// The label that separates prompt directives from the enforced boundary in `describe`.
const GUIDANCE: &str = "Guidance from the policy's [directives], not enforcement: it grants nothing \
                        and restricts nothing; only the authorization boundary above is enforced.";

/// `warden policy describe`: the authorization boundary the compiled policy enforces, then
/// the prompt directives (if any), labelled as guidance.
pub(crate) fn describe(
    a: &PolicyArgs,
    format: OutputFormat,
    out: &mut impl Write,
) -> Result<ExitCode, CliError> {
    let s = a.snapshot()?;
    let boundary = s.describe();
    let directives = s.directives();
    match format {
        OutputFormat::Json => {
            let directives = if directives.is_empty() {
                Value::Null
            } else {
                json!({
                    "enforced": false,
                    "authority": directives.authority,
                    "boundaries": directives.boundaries,
                    "escalations": directives.escalations,
                    "text": directives.render(),
                })
            };
            let value = json!({"boundary": boundary, "directives": directives});
            writeln!(out, "{value}")?;
        }
        OutputFormat::Text => {
            write!(out, "{}", boundary.to_markdown())?;
            if !directives.is_empty() {
                writeln!(out)?;
                writeln!(out, "<prompt_directives>")?;
                writeln!(out, "{GUIDANCE}")?;
                writeln!(out)?;
                writeln!(out, "{}", directives.render())?;
                writeln!(out, "</prompt_directives>")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
