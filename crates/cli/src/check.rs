//! `warden check` (docs/design/policy.md#the-warden-check-json-line, a contract) and `warden
//! explain`.
//!
//! Input is validated whole before anything is decided: an invalid `--args`, or any invalid
//! line of a `--calls` file, is exit 2 with nothing printed on stdout.

use std::io::{BufRead as _, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use serde_json::{Value, json};
use warden_policy::{
    Call, PolicySnapshot, ScopeAuthority, ScopeStage, ScopeVerdict, Verdict, edge,
};

use crate::error::CliError;
use crate::{CheckArgs, ExplainArgs, OutputFormat, load};

/// One line of `warden check --format json`.
#[derive(Serialize)]
struct CheckLine<'a> {
    decision: &'a str,
    rule: Option<&'a str>,
    source: Option<&'a str>,
    reason: &'a str,
    subjects: Vec<SubjectLine<'a>>,
    policy_digest: &'a str,
    /// With `--scope`: how the scope chain decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<ScopeLine<'a>>,
}

/// How a scope chain decided (`warden check --scope`).
#[derive(Serialize)]
struct ScopeLine<'a> {
    /// The scope the call was made in.
    caller: &'a str,
    /// The scope whose policy decided.
    decided_by: &'a str,
    stage: ScopeStage,
    authorities: &'a [ScopeAuthority],
    scope_digest: &'a str,
}

#[derive(Serialize)]
struct SubjectLine<'a> {
    text: &'a str,
    tool: &'a str,
    decision: &'a str,
    rule: Option<&'a str>,
}

fn parse_args_object(text: &str, what: &str) -> Result<Value, CliError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| CliError::Input(format!("{what}: invalid JSON: {e}")))?;
    if !value.is_object() {
        return Err(CliError::Input(format!("{what}: must be a JSON object")));
    }
    Ok(value)
}

fn cwd(arg: Option<&PathBuf>) -> Result<PathBuf, CliError> {
    match arg {
        Some(dir) => load::absolute(dir),
        None => {
            std::env::current_dir().map_err(|e| CliError::Input(format!("current directory: {e}")))
        }
    }
}

/// Reads a JSON Lines file of calls (the call log `warden replay` reads too); any bad line fails
/// the whole file.
fn read_calls(path: &PathBuf, cwd: &std::path::Path) -> Result<Vec<Call>, CliError> {
    let file = std::fs::File::open(path)
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
    let mut calls = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let where_ = format!("{}:{}", path.display(), i + 1);
        let line = line.map_err(|e| CliError::Input(format!("{where_}: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line)
            .map_err(|e| CliError::Input(format!("{where_}: invalid JSON: {e}")))?;
        let Value::Object(obj) = value else {
            return Err(CliError::Input(format!(
                "{where_}: a call is a JSON object {{\"tool\":…,\"args\":…}}"
            )));
        };
        let line = warden_harness::transcript::warden_call(&obj, Some(cwd))
            .map_err(|e| CliError::Input(format!("{where_}: {e}")))?;
        calls.push(line.call);
    }
    Ok(calls)
}

pub(crate) fn run_check(a: &CheckArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let cwd = cwd(a.cwd.as_ref())?;
    // Validate the input before loading anything, so a bad input decides nothing.
    let mut calls = match (&a.tool, &a.args, &a.calls) {
        (Some(tool), Some(args), None) => {
            vec![Call::new(tool.clone(), parse_args_object(args, "--args")?).with_cwd(&cwd)]
        }
        (None, None, Some(path)) => read_calls(path, &cwd)?,
        _ => {
            return Err(CliError::Input(
                "give either --tool NAME --args JSON, or --calls FILE.jsonl".into(),
            ));
        }
    };
    if let Some(name) = &a.scope {
        let scope = load::scope(&a.policy.files(), a.policy.project_root.as_deref(), name)?;
        let chain = scope.chain();
        // Every scope shares the path environment: the root's policy resolves the paths.
        if let Some(root) = chain.first().and_then(|s| s.policy()) {
            for call in &mut calls {
                edge::resolve_call_paths(root, call);
            }
        }
        for call in &calls {
            let sv = scope.decide(call);
            match a.format {
                OutputFormat::Json => write_json(out, &sv.verdict, Some(&sv))?,
                OutputFormat::Text => write_text(out, call, &sv.verdict, &sv.reason)?,
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let snapshot = a.policy.snapshot()?;
    for call in &mut calls {
        edge::resolve_call_paths(&snapshot, call);
    }
    for call in &calls {
        let verdict = snapshot.decide(call);
        match a.format {
            OutputFormat::Json => write_json(out, &verdict, None)?,
            OutputFormat::Text => write_text(out, call, &verdict, &verdict.reason)?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One JSON line; with `--scope`, the reason is the scope verdict's (it names the deciding
/// scope) and a `scope` object says how the chain decided.
fn write_json(
    out: &mut impl Write,
    v: &Verdict,
    scope: Option<&ScopeVerdict>,
) -> Result<(), CliError> {
    let line = CheckLine {
        decision: v.decision.as_str(),
        rule: v.rule.as_deref(),
        source: v.source.as_deref(),
        reason: scope.map_or(&v.reason, |s| &s.reason),
        subjects: v
            .subjects
            .iter()
            .map(|s| SubjectLine {
                text: &s.text,
                tool: &s.tool,
                decision: s.decision.as_str(),
                rule: s.rule.as_deref(),
            })
            .collect(),
        policy_digest: v.policy_digest.as_str(),
        scope: scope.map(|s| ScopeLine {
            caller: &s.caller,
            decided_by: &s.scope,
            stage: s.stage,
            authorities: &s.authorities,
            scope_digest: s.scope_digest.as_str(),
        }),
    };
    serde_json::to_writer(&mut *out, &line).map_err(|e| CliError::Io(e.into()))?;
    out.write_all(b"\n")?;
    Ok(())
}

fn write_text(
    out: &mut impl Write,
    call: &Call,
    v: &Verdict,
    reason: &str,
) -> Result<(), CliError> {
    let cited = match (&v.rule, &v.source) {
        (Some(r), Some(s)) => format!(" {r} [{s}]"),
        (Some(r), None) => format!(" {r}"),
        _ => String::new(),
    };
    writeln!(out, "{}: {}{cited}: {reason}", call.tool, v.decision)?;
    Ok(())
}

pub(crate) fn run_explain(a: &ExplainArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let cwd = cwd(a.cwd.as_ref())?;
    let args = parse_args_object(&a.args, "--args")?;
    let mut call = Call::new(a.tool.clone(), args).with_cwd(&cwd);
    let Some(name) = &a.scope else {
        let snapshot = a.policy.snapshot()?;
        edge::resolve_call_paths(&snapshot, &mut call);
        match a.format {
            OutputFormat::Text => explain(out, &snapshot, &call)?,
            OutputFormat::Json => {
                let value = json!({
                    "policy": policy_json(&snapshot),
                    "call": {"tool": call.tool, "args": call.args},
                    "explanation": snapshot.explain(&call),
                });
                writeln!(out, "{value}")?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    let scope = load::scope(&a.policy.files(), a.policy.project_root.as_deref(), name)?;
    let chain = scope.chain();
    if let Some(root) = chain.first().and_then(|s| s.policy()) {
        edge::resolve_call_paths(root, &mut call);
    }
    let sv = scope.decide(&call);
    let names: Vec<&str> = chain.iter().map(|s| s.name()).collect();
    let decider = chain
        .iter()
        .find(|s| s.name() == &*sv.scope)
        .and_then(|s| s.policy());
    if a.format == OutputFormat::Json {
        let value = json!({
            "scope": {"chain": names, "verdict": sv},
            "policy": decider.map(|p| policy_json(p)),
            "call": {"tool": call.tool, "args": call.args},
            "explanation": decider.map(|p| p.explain(&call)),
        });
        writeln!(out, "{value}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "scope    {} (chain {})", sv.caller, names.join(" > "))?;
    writeln!(out, "decision: {}", sv.decision())?;
    writeln!(out, "reason:   {}", sv.reason)?;
    writeln!(
        out,
        "decided by scope {} ({})",
        sv.scope,
        stage_name(sv.stage)
    )?;
    for a in &sv.authorities {
        writeln!(
            out,
            "relies on scope {} expanding its parent under the authority {}",
            a.scope, a.authority
        )?;
    }
    writeln!(out, "scope digest {}", sv.scope_digest)?;
    if let Some(policy) = decider {
        writeln!(out)?;
        writeln!(out, "the policy of scope {}:", sv.scope)?;
        explain(out, policy, &call)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The policy an explanation is of: id, version and digest.
fn policy_json(snapshot: &PolicySnapshot) -> Value {
    json!({
        "id": snapshot.id(),
        "version": snapshot.version(),
        "digest": snapshot.digest().as_str(),
    })
}

/// How a scope verdict was reached, in words.
fn stage_name(stage: ScopeStage) -> &'static str {
    match stage {
        ScopeStage::AncestorDeny => "an ancestor's deny rules, asked first",
        ScopeStage::Own => "its own policy",
        ScopeStage::Inherited => "inherited: the calling scope has no policy of its own",
        ScopeStage::Stricter => "stricter than the calling scope's own verdict",
        ScopeStage::AncestorMode => "an ancestor's operating mode",
    }
}

fn explain(out: &mut impl Write, snapshot: &PolicySnapshot, call: &Call) -> Result<(), CliError> {
    let e = snapshot.explain(call);
    let v = &e.verdict;
    writeln!(
        out,
        "policy {} version {} ({})",
        snapshot.id(),
        snapshot.version(),
        snapshot.digest()
    )?;
    writeln!(out, "call   {} {}", call.tool, call.args)?;
    writeln!(out)?;
    writeln!(out, "decision: {}", v.decision)?;
    writeln!(out, "reason:   {}", v.reason)?;
    if let Some(rule) = &v.rule {
        writeln!(
            out,
            "rule:     {rule} (source {})",
            v.source.as_deref().unwrap_or("-")
        )?;
    }
    writeln!(out)?;
    if e.subjects.is_empty() {
        writeln!(
            out,
            "subjects: none (the call could not be split into subjects)"
        )?;
    }
    for (i, (trace, sv)) in e.subjects.iter().zip(&v.subjects).enumerate() {
        writeln!(
            out,
            "subject {}: {} [{}] → {}",
            i + 1,
            trace.text,
            trace.tool,
            sv.decision
        )?;
        if let Some(shell) = &trace.shell {
            writeln!(
                out,
                "  written (allow rules):        {}",
                shell.written.join(" ")
            )?;
            writeln!(
                out,
                "  normalized (deny/ask rules):  {}",
                shell.normalized.join(" ")
            )?;
            for r in &shell.also {
                writeln!(out, "  also tried by deny/ask rules: {}", r.join(" "))?;
            }
            for n in &shell.notes {
                writeln!(out, "  note: {n}")?;
            }
        }
        match (&sv.rule, &sv.source) {
            (Some(r), Some(s)) => writeln!(out, "  decided by {r} [{s}]")?,
            (Some(r), None) => writeln!(out, "  decided by {r}")?,
            _ => writeln!(out, "  decided by no rule")?,
        }
        writeln!(out, "  {}", sv.reason)?;
        if trace.matches.is_empty() {
            writeln!(out, "  no rule matches it")?;
        }
        for m in &trace.matches {
            let expanded = m
                .written
                .as_deref()
                .map(|w| format!(" (written {w})"))
                .unwrap_or_default();
            match &m.carved_out_by {
                Some((c, s)) => writeln!(
                    out,
                    "  {:<5} {}{expanded} [{}]: carved out by {c} [{s}]",
                    m.list.as_str(),
                    m.rule,
                    m.source
                )?,
                None => writeln!(
                    out,
                    "  {:<5} {}{expanded} [{}]: matches",
                    m.list.as_str(),
                    m.rule,
                    m.source
                )?,
            }
        }
    }
    writeln!(out)?;
    writeln!(out, "sources (evaluation order):")?;
    for s in snapshot.sources() {
        writeln!(
            out,
            "  {} rank {} {}{}",
            s.name,
            s.rank,
            if s.trusted { "trusted" } else { "untrusted" },
            if s.own { ", the file's own lists" } else { "" }
        )?;
        for w in &s.withheld {
            writeln!(
                out,
                "    withheld allow {w}: the source is not trusted, so its allow rules never apply"
            )?;
        }
    }
    writeln!(out, "default: {}", snapshot.default_decision())?;
    Ok(())
}
