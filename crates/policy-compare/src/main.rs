//! `policy-compare`: the whole-process side of the comparison.
//!
//! - `policy-compare write DIR RULES CALLS`: writes the generated policy at `RULES` rules as
//!   `DIR/warden.toml`, `DIR/policy.cedar` and `DIR/policy.rego`, `CALLS` calls cycling through
//!   the generated ones as `DIR/calls.jsonl` (the `warden check --calls` format), as many of
//!   the calls that are not shell commands as `DIR/calls-noshell.jsonl`, and one call as
//!   `DIR/one.jsonl` (for the start-up figure);
//! - `policy-compare agree RULES`: the differential check on every generated call at `RULES`
//!   rules (Warden, Cedar and Rego), one line of counts; exit 1 on a disagreement, each printed;
//! - `policy-compare cedar POLICY CALLS` and `policy-compare rego POLICY CALLS`: load the policy,
//!   read the calls file (the same JSON lines `warden check --calls` reads), decide each call
//!   and print its decision, one word a line.
//!
//! Exit codes: 0 ok, 1 the engines disagree, 2 a usage error or bad input.
#![forbid(unsafe_code)]

use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::ExitCode;

use warden_policy_compare::{CedarEngine, Decision, RegoEngine, calls, peer_arg, rules};

const USAGE: &str = "usage: policy-compare write DIR RULES CALLS | agree RULES | cedar POLICY CALLS | rego POLICY CALLS";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", dir, n, count] => write(Path::new(dir), n, count),
        ["agree", n] => match agree_all(n) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        ["cedar", policy, calls] => read(policy).and_then(|text| {
            let engine = CedarEngine::from_text(&text)?;
            decide_file(calls, |tool, arg| engine.decide(tool, arg))
        }),
        ["rego", policy, calls] => read(policy).and_then(|text| {
            let engine = RegoEngine::from_text(&text)?;
            decide_file(calls, |tool, arg| engine.decide(tool, arg))
        }),
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Every generated call at `n` rules through the three engines; whether they all agreed.
fn agree_all(n: &str) -> Result<bool, String> {
    let n: usize = n.parse().map_err(|e| format!("RULES: {e}"))?;
    let calls = calls(n);
    let peers = warden_policy_compare::Peers {
        cedar: true,
        rego: true,
    };
    let found = warden_policy_compare::agree(n, &calls, peers)?;
    for d in &found.disagreements {
        println!("disagree: {d}");
    }
    let [allow, ask, deny] = found.answers;
    println!(
        "{n} rules: {} calls, {} disagreements (Warden: {allow} allow, {ask} ask, {deny} deny)",
        calls.len(),
        found.disagreements.len()
    );
    Ok(found.disagreements.is_empty())
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))
}

fn write(dir: &Path, n: &str, count: &str) -> Result<(), String> {
    let n: usize = n.parse().map_err(|e| format!("RULES: {e}"))?;
    let count: usize = count.parse().map_err(|e| format!("CALLS: {e}"))?;
    let rules = rules(n);
    let calls = calls(n);
    let put = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    put("warden.toml", warden_policy_compare::warden_toml(&rules))?;
    put("policy.cedar", warden_policy_compare::cedar_text(&rules))?;
    put("policy.rego", warden_policy_compare::rego_text(&rules))?;
    let lines: String = calls
        .iter()
        .cycle()
        .take(count)
        .map(|c| c.json_line() + "\n")
        .collect();
    put("calls.jsonl", lines)?;
    let plain: String = calls
        .iter()
        .filter(|c| c.tool != "bash")
        .cycle()
        .take(count)
        .map(|c| c.json_line() + "\n")
        .collect();
    put("calls-noshell.jsonl", plain)?;
    let first = calls
        .first()
        .map(|c| c.json_line() + "\n")
        .unwrap_or_default();
    put("one.jsonl", first)
}

/// Decides every call of a calls file, printing one decision a line.
fn decide_file(
    path: &str,
    decide: impl Fn(&str, &str) -> Result<Decision, String>,
) -> Result<(), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{path}:{}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let call: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| format!("{path}:{}: {e}", i + 1))?;
        let tool = call["tool"]
            .as_str()
            .ok_or_else(|| format!("{path}:{}: no tool", i + 1))?;
        let field = match tool {
            "bash" => Some("command"),
            "read" => Some("path"),
            "web_fetch" => Some("url"),
            _ => None,
        };
        let value = field.and_then(|f| call["args"][f].as_str());
        let decision = decide(tool, peer_arg(tool, value))?;
        writeln!(out, "{}", decision.as_str()).map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}
