//! `warden hook claude-code|codex|gemini`: one provider hook event on stdin, one answer on
//! stdout/stderr, and an exit code the provider cannot misread (Claude Code: a contract,
//! docs/design/hooks.md#claude-code; Codex: docs/codex.md; Gemini CLI: docs/gemini.md). The three
//! share one decision path: guards on the input, the policy, the journal; only parsing, the
//! tool mapping and the answer's shape are the provider's.
//!
//! Claude Code fails *open* on anything but exit 2 (a crash, exit 1, a timeout, output it
//! cannot parse all let the call proceed), so every failure here, panics included, ends in
//! exit 2 with the reason on stderr, and stdout is written only once the answer is complete.
//! (This relies on unwinding: the release profile must not set `panic = "abort"`.)
//! Policies are read on every call, their rules from the compiled-policy cache when it holds a
//! current image (`crate::policy_cache`: checked before use, protected from the agent, only for
//! policy files this user owns), and nothing here starts an async runtime.
//!
//! The policy's `[guards]` (docs/guards.md) run before the decision on `PreToolUse` (a blocking
//! guard denies; a redaction is decided and handed back as `updatedInput`) and over the tool's
//! result on `PostToolUse` (a redaction or a withheld result as `updatedToolOutput`).

use std::borrow::Cow;
use std::io::{Read as _, Write};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use warden_contracts::{
    ChainId, Digest, EvidenceError, OperationId, ReasonCode, SessionId, Timestamp,
};
use warden_evidence::payload::{Label, RuleText};
use warden_evidence::{
    HookDecision, HookVerdict, JournalAppend, JournalRecordType, JournalStore as _,
    ProviderObservation, Reporter, SqliteStore,
};
use warden_harness::claude_code::{self, HookEvent, ToolEvent};
use warden_harness::hook::{self, HookAnswer, HookError, Mapped, ToolRequest};
use warden_harness::{codex, gemini};
use warden_policy::{Decision, Finding, GuardOutcome, PolicySnapshot, Verdict, edge};

use crate::error::CliError;
use crate::load;

/// The largest hook event read from stdin.
const MAX_EVENT_BYTES: u64 = 64 * 1024 * 1024;

/// The hook timeout written into the settings fragment, in seconds.
const HOOK_TIMEOUT_SECS: u32 = 10;

/// The hook timeout written into Gemini CLI's settings fragment, in milliseconds.
const GEMINI_TIMEOUT_MS: u32 = HOOK_TIMEOUT_SECS * 1000;

/// `warden hook <provider>`.
#[derive(Debug, Subcommand)]
pub(crate) enum HookCommand {
    /// Answer one Claude Code PreToolUse/PostToolUse hook event read from stdin.
    ClaudeCode(HookArgs),
    /// Answer one Codex PreToolUse hook event read from stdin (deny and ask block: exit 2,
    /// the reason on stderr).
    Codex(HookArgs),
    /// Answer one Gemini CLI BeforeTool hook event read from stdin.
    Gemini(HookArgs),
}

/// `warden hook <provider>`'s flags.
#[derive(Debug, Args)]
pub(crate) struct HookArgs {
    #[command(flatten)]
    policy: crate::PolicyArgs,
    /// Journal verdicts and the provider's reports of what ran to this SQLite store.
    #[arg(long, value_name = "PATH")]
    journal: Option<PathBuf>,
    /// Print the provider's settings fragment that installs this hook, and exit.
    #[arg(long)]
    print_settings: bool,
    /// Compile the policy on every call, without the compiled-policy cache under
    /// `.warden/cache/` in the project root (docs/policy.md, "The compiled policy cache").
    #[arg(long)]
    no_cache: bool,
}

/// What the hook answers: stdout, stderr and the exit code.
type Answer = HookAnswer;

/// The providers whose hooks answer through [`provider_answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    Codex,
    Gemini,
}

impl Provider {
    fn name(self) -> &'static str {
        match self {
            Self::Codex => codex::PROVIDER,
            Self::Gemini => gemini::PROVIDER,
        }
    }

    fn event(self) -> &'static str {
        match self {
            Self::Codex => codex::EVENT,
            Self::Gemini => gemini::EVENT,
        }
    }

    fn parse(self, text: &str) -> Result<ToolRequest, HookError> {
        match self {
            Self::Codex => codex::parse_event(text),
            Self::Gemini => gemini::parse_event(text),
        }
    }

    fn to_call(self, request: &ToolRequest) -> Result<Mapped, HookError> {
        match self {
            Self::Codex => codex::to_call(request),
            Self::Gemini => gemini::to_call(request),
        }
    }

    fn answer(self, decision: Decision, reason: &str) -> Answer {
        match self {
            Self::Codex => codex::answer(decision, reason),
            Self::Gemini => gemini::answer(decision, reason),
        }
    }

    /// The provider's blocking answer for a failure.
    fn block(self, reason: &str) -> Answer {
        match self {
            Self::Codex => codex::block(reason),
            Self::Gemini => gemini::block(reason),
        }
    }
}

pub(crate) fn run(cmd: &HookCommand, out: &mut impl Write) -> Result<ExitCode, CliError> {
    match cmd {
        HookCommand::ClaudeCode(a) if a.print_settings => print_settings(a, out),
        HookCommand::ClaudeCode(a) => {
            Ok(deliver(fail_closed(|| answer(a), claude_code_block), out))
        }
        HookCommand::Codex(a) => provider_hook(a, Provider::Codex, out),
        HookCommand::Gemini(a) => provider_hook(a, Provider::Gemini, out),
    }
}

/// A provider's hook: the settings that install it (`--print-settings`), or its answer to one
/// event, failing closed.
fn provider_hook(
    a: &HookArgs,
    provider: Provider,
    out: &mut impl Write,
) -> Result<ExitCode, CliError> {
    if a.print_settings {
        return print_provider_settings(a, provider, out);
    }
    Ok(deliver(
        fail_closed(|| provider_answer(a, provider), |r| provider.block(r)),
        out,
    ))
}

/// Claude Code's blocking answer: exit 2 with the reason on stderr.
fn claude_code_block(reason: &str) -> Answer {
    Answer {
        stdout: None,
        stderr: Some(reason.to_owned()),
        code: 2,
    }
}

/// Runs `answer`, turning an error or a panic into the provider's blocking answer.
fn fail_closed(
    answer: impl FnOnce() -> Result<Answer, CliError>,
    block: impl Fn(&str) -> Answer,
) -> Answer {
    // A panic must not print to stdout (the default hook prints to stderr only, but say so),
    // and must end in the blocking answer, not in Rust's exit 101.
    std::panic::set_hook(Box::new(|_| {}));
    match std::panic::catch_unwind(AssertUnwindSafe(answer)) {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => block(&format!("error: {e}; the call is blocked")),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            block(&format!(
                "error: warden hook failed inside (panic: {what}); the call is blocked"
            ))
        }
    }
}

/// Writes the answer (stdout only once it is complete) and exits with its code; an answer
/// that cannot be delivered still blocks.
fn deliver(answer: Answer, out: &mut impl Write) -> ExitCode {
    let mut code = answer.code;
    if let Some(text) = &answer.stdout
        && (writeln!(out, "{text}").is_err() || out.flush().is_err())
    {
        // An answer that cannot be delivered must still block.
        code = 2;
    }
    match &answer.stderr {
        Some(text) => eprintln!("{text}"),
        // A block must say why on stderr: Codex ignores an exit 2 without it, and Gemini lets
        // a failing hook with no output through.
        None if code != answer.code => {
            eprintln!("error: warden could not write its answer; the call is blocked");
        }
        None => {}
    }
    ExitCode::from(code)
}

/// The hook event on stdin, at most [`MAX_EVENT_BYTES`].
fn read_event() -> Result<String, CliError> {
    let mut text = String::new();
    std::io::stdin()
        .take(MAX_EVENT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| CliError::Input(format!("cannot read the hook event on stdin: {e}")))?;
    if text.len() as u64 > MAX_EVENT_BYTES {
        return Err(CliError::Input(format!(
            "the hook event is larger than {MAX_EVENT_BYTES} bytes"
        )));
    }
    Ok(text)
}

fn answer(a: &HookArgs) -> Result<Answer, CliError> {
    let text = read_event()?;
    let event = claude_code::parse_event(&text).map_err(|e| CliError::Input(e.to_string()))?;
    match event {
        HookEvent::PreToolUse(e) => pre_tool_use(a, &e),
        HookEvent::PostToolUse(e) => post_tool_use(a, &e),
    }
}

/// The working folder relative paths in the call resolve against: the event's `cwd` (made
/// absolute), else this process's.
fn event_cwd(e: &ToolEvent) -> Result<PathBuf, CliError> {
    match &e.cwd {
        Some(dir) => load::absolute(dir),
        None => std::env::current_dir()
            .map_err(|err| CliError::Input(format!("current directory: {err}"))),
    }
}

fn pre_tool_use(a: &HookArgs, e: &ToolEvent) -> Result<Answer, CliError> {
    let (Some(tool_name), Some(tool_input)) = (&e.tool_name, &e.tool_input) else {
        return Err(CliError::Input(
            "PreToolUse without tool_name or tool_input".into(),
        ));
    };
    let snapshot = a.snapshot()?;
    let cwd = event_cwd(e)?;
    // Guards first: a blocking guard denies; a redacted input is what gets decided and run.
    let (input, redacted): (Cow<'_, Value>, Option<Vec<Finding>>) =
        match snapshot.guards().check_json(tool_input) {
            GuardOutcome::Pass => (Cow::Borrowed(tool_input), None),
            GuardOutcome::Redacted { text, findings } => (Cow::Owned(text), Some(findings)),
            GuardOutcome::Blocked { reason, .. } => {
                return guard_denied(a, e, tool_name, tool_input, &snapshot, &reason);
            }
        };
    let mut call = claude_code::to_call(tool_name, &input, Some(&cwd));
    edge::resolve_call_paths(&snapshot, &mut call);
    inject_test_panic();
    let verdict = snapshot.decide(&call);
    let mut reason = claude_code::hook_reason(&verdict);
    if let Some(findings) = &redacted {
        reason = claude_code::truncate(
            &format!(
                "{reason} [secrets redacted from the input: {}]",
                listed(findings)
            ),
            claude_code::MAX_REASON_CHARS,
        );
    }
    if let Some(path) = &a.journal {
        let asker = Asker::claude_code("PreToolUse", e);
        journal_verdict(path, &asker, tool_name, &input, &snapshot, &verdict)?;
    }
    let stdout = match (&redacted, verdict.decision) {
        // Claude Code runs the input a hook hands back; a denied call needs none.
        (Some(_), Decision::Allow | Decision::Ask) => json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": verdict.decision.as_str(),
                "permissionDecisionReason": reason,
                "updatedInput": input,
            }
        })
        .to_string(),
        _ => claude_code::pre_tool_use_output(verdict.decision, &reason),
    };
    Ok(match verdict.decision {
        Decision::Deny => Answer {
            stdout: Some(stdout),
            stderr: Some(reason),
            code: 2,
        },
        Decision::Allow | Decision::Ask => Answer {
            stdout: Some(stdout),
            stderr: None,
            code: 0,
        },
    })
}

/// Codex's and Gemini CLI's pre-tool hook: the one decision path (guards on the input, the
/// policy on the mapped call, the journal) answered in the provider's terms. A guard that
/// would redact blocks instead: neither provider is sure to run a rewritten input, so the
/// call with the secret is refused and the agent can retry without it.
fn provider_answer(a: &HookArgs, provider: Provider) -> Result<Answer, CliError> {
    let text = read_event()?;
    let request = provider
        .parse(&text)
        .map_err(|e| CliError::Input(e.to_string()))?;
    let snapshot = a.snapshot()?;
    let asker = Asker {
        provider: provider.name(),
        event: provider.event(),
        session_id: request.session_id.as_deref(),
        tool_use_id: request.tool_use_id.as_deref(),
    };
    let guard_block = match snapshot.guards().check_json(&request.tool_input) {
        GuardOutcome::Pass => None,
        GuardOutcome::Redacted { findings, .. } => Some(format!(
            "the input holds secrets ({}); retry without them",
            listed(&findings)
        )),
        GuardOutcome::Blocked { reason, .. } => Some(reason),
    };
    if let Some(why) = guard_block {
        if let Some(path) = &a.journal {
            journal_guard(
                path,
                &asker,
                &request.tool_name,
                &request.tool_input,
                &snapshot,
            )?;
        }
        return Ok(provider.block(&format!("Warden: a guard blocked this call: {why}")));
    }
    let mapped = provider
        .to_call(&request)
        .map_err(|e| CliError::Input(e.to_string()))?;
    let mut call = mapped.call;
    edge::resolve_call_paths(&snapshot, &mut call);
    if let Some(Ok(subjects)) = &mapped.subjects {
        edge::resolve_subject_paths(&snapshot, &mut call, subjects);
    }
    inject_test_panic();
    let verdict = match mapped.subjects {
        None => snapshot.decide(&call),
        Some(subjects) => snapshot.decide_subjects(&call, subjects),
    };
    if let Some(path) = &a.journal {
        journal_verdict(
            path,
            &asker,
            &request.tool_name,
            &request.tool_input,
            &snapshot,
            &verdict,
        )?;
    }
    Ok(provider.answer(verdict.decision, &claude_code::hook_reason(&verdict)))
}

fn post_tool_use(a: &HookArgs, e: &ToolEvent) -> Result<Answer, CliError> {
    let snapshot = a.snapshot()?;
    if let Some(path) = &a.journal {
        let tool_name = e
            .tool_name
            .as_deref()
            .ok_or_else(|| CliError::Input("PostToolUse without tool_name".into()))?;
        journal_observation(path, e, tool_name, &snapshot)?;
    }
    Ok(Answer {
        stdout: e
            .tool_response
            .as_ref()
            .and_then(|r| guard_result(&snapshot, r)),
        stderr: None,
        code: 0,
    })
}

/// A `PreToolUse` whose input a guard blocks: denied (exit 2) with the guard's reason.
fn guard_denied(
    a: &HookArgs,
    e: &ToolEvent,
    tool_name: &str,
    tool_input: &Value,
    snapshot: &PolicySnapshot,
    why: &str,
) -> Result<Answer, CliError> {
    let reason = claude_code::truncate(
        &format!("Warden: a guard blocked this call: {why}"),
        claude_code::MAX_REASON_CHARS,
    );
    if let Some(path) = &a.journal {
        journal_guard(
            path,
            &Asker::claude_code("PreToolUse", e),
            tool_name,
            tool_input,
            snapshot,
        )?;
    }
    Ok(Answer {
        stdout: Some(claude_code::pre_tool_use_output(Decision::Deny, &reason)),
        stderr: Some(reason),
        code: 2,
    })
}

/// The `PostToolUse` answer when the guards act on a tool's result: the tool already ran, so
/// the result the model reads is replaced (`updatedToolOutput`): redacted, or, when a guard
/// blocks, every string withheld and the reason given (`decision: block`). `None` when the
/// result passes.
fn guard_result(snapshot: &PolicySnapshot, response: &Value) -> Option<String> {
    match snapshot.guards().check_json(response) {
        GuardOutcome::Pass => None,
        GuardOutcome::Redacted { text, findings } => Some(
            json!({
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUse",
                    "updatedToolOutput": text,
                    "additionalContext": claude_code::truncate(
                        &format!("Warden redacted secrets from this tool's output: {}", listed(&findings)),
                        claude_code::MAX_REASON_CHARS,
                    ),
                }
            })
            .to_string(),
        ),
        GuardOutcome::Blocked { reason, .. } => Some(
            json!({
                "decision": "block",
                "reason": claude_code::truncate(
                    &format!("Warden: a guard withheld this tool's output: {reason}"),
                    claude_code::MAX_REASON_CHARS,
                ),
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUse",
                    "updatedToolOutput": withheld(response),
                }
            })
            .to_string(),
        ),
    }
}

/// The same shape with every string replaced, so nothing the guard blocked reaches the model.
fn withheld(v: &Value) -> Value {
    match v {
        Value::String(_) => Value::String(WITHHELD.into()),
        Value::Array(items) => Value::Array(items.iter().map(withheld).collect()),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), withheld(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What a withheld string reads.
const WITHHELD: &str = "[withheld by a Warden guard]";

/// Findings for a reason: kind and place, at most five.
fn listed(findings: &[Finding]) -> String {
    let mut parts: Vec<String> = findings.iter().take(5).map(ToString::to_string).collect();
    if findings.len() > 5 {
        parts.push(format!("and {} more", findings.len() - 5));
    }
    parts.join("; ")
}

/// A panic on demand, so tests can prove a panic inside the hook blocks the call. Compiled
/// into debug builds only: release builds have no such switch.
fn inject_test_panic() {
    #[cfg(debug_assertions)]
    if std::env::var_os("WARDEN_HOOK_TEST_PANIC").is_some() {
        panic!("injected by WARDEN_HOOK_TEST_PANIC");
    }
}

impl HookArgs {
    /// The policy, with the policy files, the journal and the policy cache protected from the
    /// agent; its rules from the compiled-policy cache unless `--no-cache`. A hook decides one
    /// call and exits, so the snapshot is kept until then rather than freed piece by piece
    /// (for a policy of 10,000 rules, a tenth of the process's time).
    fn snapshot(&self) -> Result<std::mem::ManuallyDrop<warden_policy::PolicySnapshot>, CliError> {
        crate::policy_cache::snapshot(
            &self.policy.files(),
            self.policy.project_root.as_deref(),
            &load::store_files(self.journal.as_deref(), "the hook's journal"),
            !self.no_cache,
        )
        .map(std::mem::ManuallyDrop::new)
    }
}

fn print_settings(a: &HookArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    // Refuse to install a hook whose policy does not load: it would block every call.
    a.policy.snapshot()?;
    let (exe, args) = hook_args(a, "claude-code")?;
    let settings = claude_code::hook_settings(&exe, &args, HOOK_TIMEOUT_SECS);
    let text = serde_json::to_string_pretty(&settings).map_err(|e| CliError::Io(e.into()))?;
    writeln!(out, "{text}")?;
    Ok(ExitCode::SUCCESS)
}

/// The hook's command line: this binary, `hook PROVIDER`, the policy flags with absolute
/// paths, and the journal.
fn hook_args(a: &HookArgs, provider: &str) -> Result<(String, Vec<String>), CliError> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| CliError::Input(format!("cannot find this binary's path: {e}")))?;
    let mut args: Vec<String> = vec!["hook".into(), provider.into()];
    for f in a.policy.files() {
        args.push(f.flag().into());
        args.push(canonical(&f.path)?);
    }
    if let Some(root) = &a.policy.project_root {
        args.push("--project-root".into());
        args.push(canonical(root)?);
    }
    if let Some(j) = &a.journal {
        args.push("--journal".into());
        args.push(load::absolute(j)?.to_string_lossy().into_owned());
    }
    if a.no_cache {
        args.push("--no-cache".into());
    }
    Ok((exe.to_string_lossy().into_owned(), args))
}

/// Codex's `config.toml` fragment or Gemini CLI's `settings.json` fragment that installs the
/// hook, its command a shell string (both run it through a shell).
fn print_provider_settings(
    a: &HookArgs,
    provider: Provider,
    out: &mut impl Write,
) -> Result<ExitCode, CliError> {
    // Refuse to install a hook whose policy does not load: it would block every call.
    a.policy.snapshot()?;
    let (exe, args) = hook_args(a, provider.name())?;
    let command = hook::shell_command(&exe, &args);
    let text = match provider {
        Provider::Codex => codex::hook_settings(&command, HOOK_TIMEOUT_SECS)
            .map_err(|e| CliError::Input(format!("cannot write the settings: {e}")))?,
        Provider::Gemini => {
            serde_json::to_string_pretty(&gemini::hook_settings(&command, GEMINI_TIMEOUT_MS))
                .map_err(|e| CliError::Io(e.into()))?
        }
    };
    writeln!(out, "{}", text.trim_end())?;
    Ok(ExitCode::SUCCESS)
}

fn canonical(p: &Path) -> Result<String, CliError> {
    let abs = load::absolute(p)?;
    Ok(abs
        .canonicalize()
        .unwrap_or(abs)
        .to_string_lossy()
        .into_owned())
}

// ---------------------------------------------------------------------------------------------
// The journal (docs/evidence.md, "Journal"): one chain per Claude Code session.

fn input_err(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Input(format!("journal: {what}: {e}"))
}

fn label(text: &str) -> Result<Label, CliError> {
    Label::new(claude_code::truncate(text, 200)).map_err(|e| input_err("label", e))
}

fn digest_of(v: &Value) -> Result<Digest, CliError> {
    let text = warden_contracts::canonical::to_canonical_string(v)
        .map_err(|e| input_err("canonical JSON", e))?;
    Ok(Digest::of_bytes(text.as_bytes()))
}

/// Who asked: the provider, its event, and the ids the journal keys on.
struct Asker<'a> {
    provider: &'static str,
    event: &'static str,
    session_id: Option<&'a str>,
    tool_use_id: Option<&'a str>,
}

impl<'a> Asker<'a> {
    /// A Claude Code event.
    fn claude_code(event: &'static str, e: &'a ToolEvent) -> Self {
        Self {
            provider: claude_code::PROVIDER,
            event,
            session_id: e.session_id.as_deref(),
            tool_use_id: e.tool_use_id.as_deref(),
        }
    }
}

/// The journal chain of a provider's session: `PROVIDER-SESSION` (the session digested when
/// it is not a valid chain id), or `PROVIDER` without one.
fn chain_of(provider: &str, session: Option<&str>) -> Result<ChainId, CliError> {
    let id = match session {
        None => provider.to_owned(),
        Some(s) => match ChainId::new(format!("{provider}-{s}")) {
            Ok(c) => return Ok(c),
            Err(_) => format!(
                "{provider}-{}",
                Digest::of_bytes(s.as_bytes())
                    .as_str()
                    .trim_start_matches("blake3:")
                    .chars()
                    .take(32)
                    .collect::<String>()
            ),
        },
    };
    ChainId::new(id).map_err(|e| input_err("chain id", e))
}

fn now() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Timestamp(ms)
}

fn journal_verdict(
    path: &Path,
    e: &Asker<'_>,
    tool_name: &str,
    tool_input: &Value,
    snapshot: &PolicySnapshot,
    verdict: &Verdict,
) -> Result<(), CliError> {
    let reason_code = if verdict.rule.is_some() {
        Some(ReasonCode::PolicyRule)
    } else if verdict.subjects.is_empty() {
        Some(ReasonCode::Unparseable)
    } else if verdict.decision == snapshot.default_decision() {
        Some(ReasonCode::PolicyDefault)
    } else {
        None
    };
    journal_decided(path, e, (tool_name, tool_input), snapshot, || {
        Ok(Decided {
            decision: match verdict.decision {
                Decision::Allow => HookDecision::Allow,
                Decision::Ask => HookDecision::Ask,
                Decision::Deny => HookDecision::Deny,
            },
            reason_code,
            rule: verdict
                .rule
                .as_deref()
                .map(|r| RuleText::new(claude_code::truncate(r, 1000)))
                .transpose()
                .map_err(|err| input_err("rule", err))?,
            source: verdict.source.as_deref().map(label).transpose()?,
            policy_digest: verdict.policy_digest.clone(),
        })
    })
}

/// Journals a guard's denial: no rule decided, the reason code says a guard did.
fn journal_guard(
    path: &Path,
    e: &Asker<'_>,
    tool_name: &str,
    tool_input: &Value,
    snapshot: &PolicySnapshot,
) -> Result<(), CliError> {
    journal_decided(path, e, (tool_name, tool_input), snapshot, || {
        Ok(Decided {
            decision: HookDecision::Deny,
            reason_code: Some(ReasonCode::Guard),
            rule: None,
            source: None,
            policy_digest: snapshot.digest().clone(),
        })
    })
}

/// What decided a journaled call: a `hook_verdict`'s fields from its decision on.
struct Decided {
    decision: HookDecision,
    reason_code: Option<ReasonCode>,
    rule: Option<RuleText>,
    source: Option<Label>,
    policy_digest: Digest,
}

/// Journals one `hook_verdict`: the call `e` asked about (its tool name and input, checked
/// first), then what `decided` answers decided it.
fn journal_decided(
    path: &Path,
    e: &Asker<'_>,
    (tool_name, tool_input): (&str, &Value),
    snapshot: &PolicySnapshot,
    decided: impl FnOnce() -> Result<Decided, CliError>,
) -> Result<(), CliError> {
    let provider = label(e.provider)?;
    let event = label(e.event)?;
    let session_id = e.session_id.and_then(|s| SessionId::new(s).ok());
    let tool = label(tool_name)?;
    let arguments_digest = digest_of(tool_input)?;
    let Decided {
        decision,
        reason_code,
        rule,
        source,
        policy_digest,
    } = decided()?;
    let payload = HookVerdict {
        provider,
        event,
        session_id,
        tool,
        arguments_digest,
        decision,
        reason_code,
        rule,
        source,
        policy_digest,
    };
    let payload = serde_json::to_value(&payload).map_err(|err| input_err("payload", err))?;
    append(path, JournalRecordType::HookVerdict, e, snapshot, payload)
}

fn journal_observation(
    path: &Path,
    e: &ToolEvent,
    tool_name: &str,
    snapshot: &PolicySnapshot,
) -> Result<(), CliError> {
    let interrupted = e
        .tool_response
        .as_ref()
        .and_then(|r| r.get("interrupted"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let payload = ProviderObservation {
        provider: label(claude_code::PROVIDER)?,
        reported_by: Reporter::Provider,
        provider_event_id: e.tool_use_id.as_deref().map(label).transpose()?,
        tool: label(tool_name)?,
        arguments_digest: e.tool_input.as_ref().map(digest_of).transpose()?,
        result_digest: e.tool_response.as_ref().map(digest_of).transpose()?,
        status: label(if interrupted {
            "interrupted"
        } else {
            "succeeded"
        })?,
    };
    let payload = serde_json::to_value(&payload).map_err(|err| input_err("payload", err))?;
    append(
        path,
        JournalRecordType::ProviderObservation,
        &Asker::claude_code("PostToolUse", e),
        snapshot,
        payload,
    )
}

/// Appends on the session's chain head; another hook process may append between reading the
/// head and appending, so a sequence conflict is retried a few times.
fn append(
    path: &Path,
    record_type: JournalRecordType,
    e: &Asker<'_>,
    snapshot: &PolicySnapshot,
    payload: Value,
) -> Result<(), CliError> {
    let store =
        SqliteStore::open(path).map_err(|err| input_err(&path.display().to_string(), err))?;
    let chain_id = chain_of(e.provider, e.session_id)?;
    let operation_id = e.tool_use_id.and_then(|id| OperationId::new(id).ok());
    let mut attempts = 0;
    loop {
        attempts += 1;
        let head = store
            .journal_head(&chain_id)
            .map_err(|err| input_err("head", err))?;
        let entry = JournalAppend {
            chain_id: chain_id.clone(),
            record_type,
            operation_id: operation_id.clone(),
            expected_sequence: head.map_or(0, |h| h.sequence + 1),
            policy_id: snapshot.id().to_owned(),
            policy_version: snapshot.version().to_owned(),
            payload: payload.clone(),
            created_at: now(),
        };
        match store.append_journal(entry) {
            Ok(_) => {
                // The record is durable (committed with synchronous=FULL). A clean close would
                // checkpoint and switch the file back to rollback-journal mode (several more
                // fsyncs, ~30 ms) on every hook call; closing keeping the WAL leaves it for the
                // next open, which every reader handles (docs/claude-code.md, "Journal").
                store.close_keeping_wal();
                return Ok(());
            }
            Err(EvidenceError::SequenceConflict { .. }) if attempts < 8 => continue,
            Err(err) => return Err(input_err("append", err)),
        }
    }
}
