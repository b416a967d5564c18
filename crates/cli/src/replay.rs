//! `warden replay` (a contract for `--format json`): every tool call in agent
//! transcripts decided against a policy, without running anything.
//!
//! Files are read and their formats recognized before anything is printed: an unreadable or
//! unrecognized file is exit 2 with nothing on stdout. A malformed line is reported on stderr
//! with its line number and skipped; the rest is evaluated (exit 0).

use std::io::{IsTerminal as _, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::Value;
use warden_harness::replay::{self, CallRef, Tally};
use warden_harness::transcript::{TranscriptCall, TranscriptFormat, TranscriptReader};
use warden_policy::{PolicySnapshot, Verdict, edge};

use crate::error::CliError;
use crate::load;

/// Inputs at least this large get a progress bar (when stdout is a terminal).
const PROGRESS_MIN_BYTES: u64 = 256 * 1024;

/// `warden replay` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ReplayFormat {
    /// Aligned columns and a summary, for people (`table` is accepted too).
    #[value(alias = "table")]
    Text,
    /// JSON Lines: one object per call, then one `{"summary":…}` line.
    Json,
}

/// `warden replay`.
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// Transcripts: Claude Code or Codex session JSONL, or Warden calls JSONL (detected).
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    policy: crate::PolicyArgs,
    /// A second policy to compare with: only the calls whose decision changes are listed.
    #[arg(long = "against", value_name = "FILE")]
    against: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReplayFormat::Text)]
    format: ReplayFormat,
    /// Where relative paths resolve for calls whose transcript names no working folder
    /// (default: the current folder).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
}

/// One line of `warden replay --format json` (key order as in the contract).
#[derive(Serialize)]
struct CallLine<'a> {
    file: &'a str,
    line: usize,
    time: Option<&'a str>,
    tool: &'a str,
    input: &'a Value,
    decision: &'a str,
    rule: Option<&'a str>,
    source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    against_decision: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    against_rule: Option<Option<&'a str>>,
}

/// A file read and recognized.
struct Input {
    name: String,
    format: TranscriptFormat,
    bytes: Vec<u8>,
}

fn read_inputs(files: &[PathBuf]) -> Result<Vec<Input>, CliError> {
    let mut out = Vec::with_capacity(files.len());
    for path in files {
        let name = path.display().to_string();
        let bytes = std::fs::read(path)
            .map_err(|e| CliError::Input(format!("{name}: cannot read: {e}")))?;
        let format = bytes
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
            .find_map(|v| TranscriptFormat::detect(&v))
            .ok_or_else(|| {
                CliError::Input(format!(
                    "{name}: format not recognized (expected a Claude Code or Codex session, or Warden calls JSONL)"
                ))
            })?;
        out.push(Input {
            name,
            format,
            bytes,
        });
    }
    Ok(out)
}

fn decide(snapshot: &PolicySnapshot, tc: &TranscriptCall) -> Verdict {
    match &tc.subjects {
        Some(subjects) => snapshot.decide_subjects(&tc.call, Ok(subjects.clone())),
        None => {
            let mut call = tc.call.clone();
            edge::resolve_call_paths(snapshot, &mut call);
            snapshot.decide(&call)
        }
    }
}

pub(crate) fn run(a: &ReplayArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let inputs = read_inputs(&a.files)?;
    let snapshot = a.policy.snapshot()?;
    let against = if a.against.is_empty() {
        None
    } else {
        // The policy compared against: project files, as `--policy` loads them.
        let files: Vec<load::PolicyPath> =
            load::PolicyPath::each(&a.against, warden_policy::Role::Project).collect();
        Some(load::snapshot(&files, a.policy.project_root.as_deref())?)
    };
    let cwd = match &a.cwd {
        Some(d) => load::absolute(d)?,
        None => std::env::current_dir()
            .map_err(|e| CliError::Input(format!("current directory: {e}")))?,
    };
    let total: u64 = inputs.iter().map(|i| i.bytes.len() as u64).sum();
    let progress = (std::io::stdout().is_terminal() && total >= PROGRESS_MIN_BYTES).then(|| {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {bytes}/{total_bytes} {bytes_per_sec} {wide_msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let mut tally = Tally::new(against.is_some());
    let mut malformed = 0u64;
    let mut rows: Vec<Row> = Vec::new();
    for input in &inputs {
        let mut reader = TranscriptReader::new(input.format, Some(cwd.clone()));
        if let Some(bar) = &progress {
            bar.set_message(input.name.clone());
        }
        for (i, raw) in input.bytes.split(|b| *b == b'\n').enumerate() {
            if let Some(bar) = &progress {
                bar.inc(raw.len() as u64 + 1);
            }
            let line_no = i + 1;
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let calls = serde_json::from_slice::<Value>(raw)
                .map_err(|e| format!("invalid JSON: {e}"))
                .and_then(|v| reader.line(&v));
            let calls = match calls {
                Ok(c) => c,
                Err(why) => {
                    malformed += 1;
                    let warning = format!(
                        "warning: {}:{line_no}: malformed line skipped: {why}",
                        input.name
                    );
                    match &progress {
                        Some(bar) => bar.suspend(|| eprintln!("{warning}")),
                        None => eprintln!("{warning}"),
                    }
                    continue;
                }
            };
            for tc in calls {
                let verdict = decide(&snapshot, &tc);
                let other = against.as_ref().map(|s| decide(s, &tc));
                tally.record(
                    CallRef {
                        file: input.name.clone(),
                        line: line_no,
                        tool: tc.call.tool.clone(),
                    },
                    &verdict,
                    other.as_ref(),
                );
                if let Some(o) = &other
                    && !replay::changed(&verdict, o)
                {
                    continue;
                }
                match a.format {
                    ReplayFormat::Json => {
                        let line = CallLine {
                            file: &input.name,
                            line: line_no,
                            time: tc.time.as_deref(),
                            tool: &tc.call.tool,
                            input: &tc.call.args,
                            decision: verdict.decision.as_str(),
                            rule: verdict.rule.as_deref(),
                            source: verdict.source.as_deref(),
                            against_decision: other.as_ref().map(|o| o.decision.as_str()),
                            against_rule: other.as_ref().map(|o| o.rule.as_deref()),
                        };
                        serde_json::to_writer(&mut *out, &line)
                            .map_err(|e| CliError::Io(e.into()))?;
                        out.write_all(b"\n")?;
                    }
                    ReplayFormat::Text => rows.push(Row::new(
                        &input.name,
                        line_no,
                        &tc,
                        &verdict,
                        other.as_ref(),
                        &snapshot,
                    )),
                }
            }
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let summary = tally
        .summary(&snapshot, inputs.len(), malformed)
        .map_err(|e| CliError::Input(e.to_string()))?;
    match a.format {
        ReplayFormat::Json => {
            let line = serde_json::json!({ "summary": summary });
            writeln!(out, "{line}")?;
        }
        ReplayFormat::Text => write_table(out, &rows, &summary, against.is_some())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// One table row.
struct Row {
    place: String,
    tool: String,
    decision: String,
    cited: String,
    what: String,
}

impl Row {
    fn new(
        file: &str,
        line: usize,
        tc: &TranscriptCall,
        v: &Verdict,
        other: Option<&Verdict>,
        snapshot: &PolicySnapshot,
    ) -> Self {
        let cited = match (&v.rule, &v.source) {
            (Some(r), Some(s)) => format!("{r} [{s}]"),
            (Some(r), None) => r.to_string(),
            _ => "(default)".into(),
        };
        let decision = match other {
            Some(o) => format!("{} -> {}", o.decision, v.decision),
            None => v.decision.to_string(),
        };
        let field = snapshot
            .profiles()
            .get(&tc.call.tool)
            .and_then(|p| tc.call.args.get(&p.field))
            .and_then(Value::as_str)
            .map_or_else(|| tc.call.args.to_string(), str::to_owned);
        let what: String = field.replace(['\n', '\t'], " ");
        Self {
            place: format!("{file}:{line}"),
            tool: tc.call.tool.clone(),
            decision,
            cited,
            what: warden_harness::claude_code::truncate(&what, 80),
        }
    }
}

fn write_table(
    out: &mut impl Write,
    rows: &[Row],
    summary: &Value,
    against: bool,
) -> Result<(), CliError> {
    let w = |f: fn(&Row) -> &str, head: &str| {
        rows.iter()
            .map(|r| f(r).chars().count())
            .chain([head.chars().count()])
            .max()
            .unwrap_or(0)
    };
    let decision_head = if against {
        "AGAINST -> NOW"
    } else {
        "DECISION"
    };
    let (wp, wt, wd, wc) = (
        w(|r| &r.place, "CALL"),
        w(|r| &r.tool, "TOOL"),
        w(|r| &r.decision, decision_head),
        w(|r| &r.cited, "RULE [SOURCE]"),
    );
    writeln!(
        out,
        "{:<wp$}  {:<wt$}  {:<wd$}  {:<wc$}  INPUT",
        "CALL", "TOOL", decision_head, "RULE [SOURCE]"
    )?;
    for r in rows {
        writeln!(
            out,
            "{:<wp$}  {:<wt$}  {:<wd$}  {:<wc$}  {}",
            r.place, r.tool, r.decision, r.cited, r.what
        )?;
    }
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let d = &summary["decisions"];
    writeln!(out)?;
    writeln!(
        out,
        "{} calls in {} file(s): allow {}, ask {}, deny {}; {} malformed line(s) skipped",
        n(&summary["calls"]),
        n(&summary["files"]),
        n(&d["allow"]),
        n(&d["ask"]),
        n(&d["deny"]),
        n(&summary["malformed_lines"])
    )?;
    if let Some(t) = summary.get("against") {
        writeln!(
            out,
            "against: allow {}, ask {}, deny {}; {} call(s) changed",
            n(&t["decisions"]["allow"]),
            n(&t["decisions"]["ask"]),
            n(&t["decisions"]["deny"]),
            n(&t["changed"])
        )?;
    }
    for r in summary["rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        writeln!(
            out,
            "  {:>6}  {} [{}]",
            n(&r["calls"]),
            r["rule"].as_str().unwrap_or(""),
            r["source"].as_str().unwrap_or("")
        )?;
    }
    let uncovered = summary["uncovered"].as_array().map_or(0, Vec::len);
    writeln!(
        out,
        "  {uncovered:>6}  no rule (the default decided, or the call was refused)"
    )?;
    let never = summary["never_fired"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if !never.is_empty() {
        writeln!(out, "never fired:")?;
        for r in never {
            writeln!(
                out,
                "  {:<5} {} [{}]",
                r["list"].as_str().unwrap_or(""),
                r["rule"].as_str().unwrap_or(""),
                r["source"].as_str().unwrap_or("")
            )?;
        }
    }
    Ok(())
}
