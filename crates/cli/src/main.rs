//! `warden`: the composition root. It parses arguments, loads configuration, wires the layers
//! together and prints results.
//!
//! **Invariant:** exit codes are 0 (ok, whatever the verdicts), 1 (a check failed), 2 (usage
//! or input error, with `error: …` on stderr); nothing is decided from invalid input.
//!
//! **Must never:** hold logic a library user would need; that lives in the library crates.
#![forbid(unsafe_code)]

mod approve;
mod check;
mod error;
mod evidence;
mod exec;
mod export;
mod governed_run;
mod harness_cmd;
mod hook;
mod load;
mod mcp_cmd;
mod policy_cache;
mod policy_cmd;
mod replay;
mod sandbox_cmd;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::CliError;

/// Warden: decides whether an AI agent's tool call may run, and proves what was decided.
#[derive(Debug, Parser)]
#[command(name = "warden", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decide tool calls against a policy: allow, ask or deny, citing the rule and source.
    Check(CheckArgs),
    /// Explain a decision: subjects, rules that fired or were carved out, withheld sources.
    Explain(ExplainArgs),
    /// Run one tool call through the full executor: resolve, validate, admit, authorize, invoke.
    Exec(exec::ExecArgs),
    /// Work with policy files.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Verify, show, certify and checkpoint evidence stores (read-only).
    #[command(subcommand)]
    Evidence(evidence::EvidenceCommand),
    /// Inspect the contained-execution backend.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Answer a coding agent's hook: decide its tool call before it runs it.
    #[command(subcommand)]
    Hook(hook::HookCommand),
    /// Decide every tool call in agent transcripts against a policy, without running anything.
    Replay(replay::ReplayArgs),
    /// Sign an approval receipt bound to one exact call, or make an approver key pair.
    Approve(approve::ApproveArgs),
    /// MCP servers behind the policy: admission, discovery, pins.
    #[command(subcommand)]
    Mcp(mcp_cmd::McpCommand),
    /// Launch a coding agent under a harness spec, reporting who enforces each control.
    #[command(subcommand)]
    Harness(harness_cmd::HarnessCommand),
}

#[derive(Debug, Subcommand)]
enum SandboxCommand {
    /// Probe each containment mechanism for real and print what this machine supports.
    Probe {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutputFormat {
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}

/// Policy files to load, each with the role its flag gives it (who it speaks for: never the
/// file's own say). At least one is required.
#[derive(Debug, Args)]
struct PolicyArgs {
    /// The organisation's policy file: outranks every other file, and no other file's
    /// carve-out, grant or preset reaches its rules. Repeatable.
    #[arg(long = "managed", value_name = "FILE")]
    managed: Vec<PathBuf>,
    /// A project policy file (.toml or .json); repeat to merge several as sources.
    #[arg(long = "policy", value_name = "FILE")]
    policies: Vec<PathBuf>,
    /// The user's own policy file, below the project's. Repeatable.
    #[arg(long = "user", value_name = "FILE")]
    user: Vec<PathBuf>,
    /// A policy file nobody vouches for (one the agent may have written): only its deny and
    /// ask rules count. Repeatable.
    #[arg(long = "untrusted", value_name = "FILE")]
    untrusted: Vec<PathBuf>,
    /// The project root relative path patterns (`edit(src/**)`) are anchored at (default:
    /// $CLAUDE_PROJECT_DIR when set, else the first --policy file's folder, else the first
    /// file's).
    #[arg(long, value_name = "DIR")]
    project_root: Option<PathBuf>,
}

impl PolicyArgs {
    /// Every file with its role: managed, project, user, untrusted, each in the order given.
    fn files(&self) -> Vec<load::PolicyPath> {
        use warden_policy::Role;
        [
            (&self.managed, Role::Managed),
            (&self.policies, Role::Project),
            (&self.user, Role::User),
            (&self.untrusted, Role::Untrusted),
        ]
        .into_iter()
        .flat_map(|(paths, role)| load::PolicyPath::each(paths, role))
        .collect()
    }

    /// Reads, merges and compiles the policy files.
    fn snapshot(&self) -> Result<warden_policy::PolicySnapshot, CliError> {
        load::snapshot(&self.files(), self.project_root.as_deref())
    }
}

#[derive(Debug, Args)]
struct CheckArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// The tool to decide (with --args).
    #[arg(long, value_name = "NAME", requires = "args", conflicts_with = "calls")]
    tool: Option<String>,
    /// The call's arguments: a JSON object.
    #[arg(long, value_name = "JSON", requires = "tool")]
    args: Option<String>,
    /// A JSON Lines file of calls, one {"tool":…,"args":…} a line (an optional "time" is ignored).
    #[arg(long, value_name = "FILE.jsonl")]
    calls: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
    /// The working directory relative paths in arguments resolve against (default: current).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Decide as subagent scope NAME would: the --policy files are composed as scopes (a file
    /// with a `[scope]` table is a subagent's policy, the others merge into the root's).
    #[arg(long, value_name = "NAME")]
    scope: Option<String>,
}

/// One call given on the command line.
#[derive(Debug, Args)]
struct CallArgs {
    /// The tool to call (`warden exec` runs `bash`, `edit`, `list`, `read` and `write`).
    #[arg(long, value_name = "NAME")]
    tool: String,
    /// The call's arguments: a JSON object.
    #[arg(long, value_name = "JSON")]
    args: String,
}

impl CallArgs {
    /// The call's arguments ([`args_object`]).
    fn arguments(&self) -> Result<serde_json::Map<String, serde_json::Value>, CliError> {
        args_object(&self.args)
    }
}

/// `--args`: a JSON object.
fn args_object(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, CliError> {
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err(CliError::Input("--args: must be a JSON object".into())),
        Err(e) => Err(CliError::Input(format!("--args: invalid JSON: {e}"))),
    }
}

#[derive(Debug, Args)]
struct ExplainArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    #[command(flatten)]
    call: CallArgs,
    /// The working directory relative paths in arguments resolve against (default: current).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Output format: text, or one JSON object (the policy, the call, and the explanation).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
    /// Explain as subagent scope NAME would decide (see `warden check --scope`): the scope
    /// chain's verdict, then the deciding scope's policy explained.
    #[arg(long, value_name = "NAME")]
    scope: Option<String>,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Compile policy files and print id, version, digest and rule counts per source.
    Compile {
        #[command(flatten)]
        policy: PolicyArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Print the authorization boundary the policy enforces (allowed reads, writes, external
    /// actions, protected targets, required approvals), then its prompt directives as guidance.
    Describe {
        #[command(flatten)]
        policy: PolicyArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Print the JSON Schema of the policy file.
    Schema,
    /// Translate a policy into Claude Code, Codex or Gemini CLI rules, with a report.
    Export(export::ExportArgs),
    /// Translate a provider's settings (Claude Code) into a Warden policy, with a report.
    Import(export::ImportArgs),
}

fn main() -> ExitCode {
    // The binary hosts the sandbox's re-exec helper: handle it before anything else runs.
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if let Some(code) = warden_sandbox::helper::dispatch(&raw) {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = Cli::parse();
    // The proxy speaks MCP on stdout from the runtime's threads: it must not find stdout
    // locked by this one.
    if let Command::Mcp(mcp_cmd::McpCommand::Proxy(a)) = &cli.command {
        return match mcp_cmd::proxy(a) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        };
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = match cli.command {
        Command::Check(a) => check::run_check(&a, &mut out),
        Command::Exec(a) => exec::run(&a, &mut out),
        Command::Explain(a) => check::run_explain(&a, &mut out),
        Command::Policy(PolicyCommand::Compile { policy, format }) => {
            policy_cmd::compile(&policy, format, &mut out)
        }
        Command::Policy(PolicyCommand::Describe { policy, format }) => {
            policy_cmd::describe(&policy, format, &mut out)
        }
        Command::Policy(PolicyCommand::Schema) => policy_cmd::schema(&mut out),
        Command::Evidence(c) => evidence::run(&c, &mut out),
        Command::Sandbox(SandboxCommand::Probe { format }) => sandbox_cmd::probe(format, &mut out),
        Command::Hook(c) => hook::run(&c, &mut out),
        Command::Replay(a) => replay::run(&a, &mut out),
        Command::Approve(a) => approve::run(&a, &mut out),
        Command::Mcp(c) => mcp_cmd::run(&c, &mut out),
        Command::Harness(c) => harness_cmd::run(&c, &mut out),
        Command::Policy(PolicyCommand::Export(a)) => export::run_export(&a, &mut out),
        Command::Policy(PolicyCommand::Import(a)) => export::run_import(&a, &mut out),
    };
    let flushed = out.flush();
    match result.and_then(|code| flushed.map(|()| code).map_err(CliError::from)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
