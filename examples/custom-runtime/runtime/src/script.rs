//! The scripted agent turn: what the "agent" asks for, in order, and what each call must end
//! as. Every call goes through [`Runtime::run`]; each outcome is printed with what was checked.

use std::path::Path;

use serde_json::{Map, Value, json};
use warden_contracts::{ApprovalReceipt, ExecutionOutcome, ReasonCode};
use warden_executor::{Runtime, ToolCall};
use warden_policy::receipt::SigningKey;

use crate::owner::Owner;

/// The notes a run starts with: (file name, text).
const NOTES: &[(&str, &str)] = &[
    ("groceries.md", "eggs, flour, milk\n"),
    (
        "ideas.md",
        "a notes app whose agent cannot go around its policy\n",
    ),
    (
        "deploy.md",
        "staging: API_KEY=4f9c2e7a1b8d60534f9c2e7a1b8d6053 (rotate monthly)\n",
    ),
    (
        "private-diary.md",
        "dear diary, the agent must never read this\n",
    ),
];

/// The secret in `deploy.md`, which no result may carry.
const SECRET: &str = "4f9c2e7a1b8d60534f9c2e7a1b8d6053";

/// A file beside the notes folder: no call may reach it.
const OUTSIDE: &str = "outside.txt";

/// Writes the notes into `notes` and a file beside it in `work`.
pub fn seed(work: &Path, notes: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(notes)?;
    for (name, text) in NOTES {
        std::fs::write(notes.join(name), text)?;
    }
    std::fs::write(work.join(OUTSIDE), "not a note: outside the notes folder\n")
}

/// What the turn saw: the failed expectations and the counts the evidence must agree with.
#[derive(Debug, Default)]
pub struct Turn {
    steps: usize,
    /// Every call has run: what is checked now is the turn's end state.
    done: bool,
    failures: Vec<String>,
    /// Calls whose tool ran and returned (`succeeded`).
    pub succeeded: u64,
}

impl Turn {
    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// Records one expectation, printed under its step.
    pub fn expect(&mut self, holds: bool, what: impl Into<String>) {
        let what = what.into();
        if holds {
            println!("      ok    {what}");
        } else {
            println!("      FAIL  {what}");
            let at = match self.steps {
                0 => "before the turn".to_owned(),
                n if self.done => format!("after step {n}"),
                n => format!("step {n}"),
            };
            self.failures.push(format!("{at}: {what}"));
        }
    }

    /// Runs one call through the runtime and prints its outcome.
    async fn call(
        &mut self,
        runtime: &Runtime,
        title: &str,
        tool: &str,
        arguments: Value,
        receipt: Option<ApprovalReceipt>,
    ) -> ExecutionOutcome {
        self.steps += 1;
        println!("{:>2}. {title}", self.steps);
        let shown = format!("{tool} {arguments}");
        let mut call = ToolCall::new(tool, arguments);
        if let Some(receipt) = receipt {
            println!(
                "    with receipt {} from {}",
                receipt.approval_id(),
                receipt.approver().id
            );
            call = call.approval(receipt);
        }
        let outcome = runtime.run(call).await.outcome;
        println!("    {shown} -> {}", describe(&outcome));
        if outcome.is_success() {
            self.succeeded += 1;
        }
        outcome
    }
}

/// One line for an outcome: its status and what matters about it.
fn describe(outcome: &ExecutionOutcome) -> String {
    match outcome {
        ExecutionOutcome::Succeeded { result, .. } => format!("succeeded {result}"),
        ExecutionOutcome::Denied {
            reason, evaluator, ..
        } => format!(
            "denied by {evaluator} ({}): {}",
            code_name(reason.code),
            reason.message
        ),
        ExecutionOutcome::Escalated { approval, .. } => {
            format!(
                "escalated to {}: {}",
                approval.authority, approval.reason.message
            )
        }
        ExecutionOutcome::Failed { failure, .. } => format!("failed: {failure:?}"),
        other => other.status().to_owned(),
    }
}

/// A reason code's stable name (`policy_rule`).
fn code_name(code: ReasonCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{code:?}"))
}

/// The reason of a denial, if the outcome is one.
fn denied_code(outcome: &ExecutionOutcome) -> Option<ReasonCode> {
    match outcome {
        ExecutionOutcome::Denied { reason, .. } => Some(reason.code),
        _ => None,
    }
}

/// The result of a success, if the outcome is one.
fn result(outcome: &ExecutionOutcome) -> Option<&Value> {
    match outcome {
        ExecutionOutcome::Succeeded { result, .. } => Some(result),
        _ => None,
    }
}

fn object(value: &Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// The notes left in the folder, sorted.
fn notes_left(notes: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(notes)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The turn: reads, a list, a read the guards redact, an escape attempt, a read the policy
/// denies, a delete the owner approves when asked, a delete with a receipt signed beforehand,
/// and a delete whose receipt is forged and which the owner refuses.
pub async fn run(runtime: &Runtime, owner: &Owner, work: &Path, notes: &Path) -> Turn {
    let mut turn = Turn::default();
    let policy = runtime.policy().digest().clone();

    let o = turn
        .call(runtime, "list the notes", "list_notes", json!({}), None)
        .await;
    let listed = result(&o).map(|r| r["notes"].clone());
    let mut seeded: Vec<&str> = NOTES.iter().map(|(name, _)| *name).collect();
    seeded.sort_unstable();
    turn.expect(
        listed == Some(json!(seeded)),
        "succeeded, listing the four seeded notes",
    );

    let o = turn
        .call(
            runtime,
            "read a note",
            "read_note",
            json!({"name": "groceries.md"}),
            None,
        )
        .await;
    turn.expect(
        result(&o).is_some_and(|r| r["text"] == NOTES[0].1),
        "succeeded with the note's text",
    );

    let o = turn
        .call(
            runtime,
            "read a note holding a secret: [guards] secrets = \"redact\" rewrites the result",
            "read_note",
            json!({"name": "deploy.md"}),
            None,
        )
        .await;
    let text = result(&o).and_then(|r| r["text"].as_str()).unwrap_or("");
    turn.expect(
        text.contains("[REDACTED:") && !text.contains(SECRET),
        "succeeded, the secret redacted before the agent sees it",
    );

    let o = turn
        .call(
            runtime,
            "delete a file outside the notes folder: refused before any policy or approval",
            "delete_note",
            json!({"name": format!("../{OUTSIDE}")}),
            None,
        )
        .await;
    turn.expect(
        denied_code(&o) == Some(ReasonCode::InvalidArguments),
        "denied: the name fails the tool's input schema (invalid_arguments)",
    );
    turn.expect(
        work.join(OUTSIDE).is_file(),
        format!("{OUTSIDE} is still there"),
    );

    let o = turn
        .call(
            runtime,
            "read a private note: the policy denies it",
            "read_note",
            json!({"name": "private-diary.md"}),
            None,
        )
        .await;
    let rule = match &o {
        ExecutionOutcome::Denied { reason, .. } => reason.rule.clone(),
        _ => None,
    };
    turn.expect(
        denied_code(&o) == Some(ReasonCode::PolicyRule)
            && rule.as_deref() == Some("read_note(private-*)"),
        "denied by the rule read_note(private-*)",
    );

    let asked = owner.asked();
    let o = turn
        .call(
            runtime,
            "delete a note: the policy asks, the owner approves with a signed receipt",
            "delete_note",
            json!({"name": "groceries.md"}),
            None,
        )
        .await;
    turn.expect(o.is_success(), "succeeded after the owner's approval");
    turn.expect(owner.asked() == asked + 1, "the owner was asked once");
    turn.expect(!notes.join("groceries.md").exists(), "groceries.md is gone");

    // The owner signs a receipt for exactly this call ahead of time; the agent presents it.
    let arguments = json!({"name": "ideas.md"});
    let receipt = owner.sign("owner-ideas-1", "delete_note", &object(&arguments), &policy);
    let signed = receipt.is_ok();
    let asked = owner.asked();
    let o = turn
        .call(
            runtime,
            "delete a note with a receipt the owner signed beforehand (ToolCall::approval)",
            "delete_note",
            arguments,
            receipt.ok(),
        )
        .await;
    turn.expect(signed, "the owner signed the receipt");
    turn.expect(o.is_success(), "succeeded on the presented receipt");
    turn.expect(owner.asked() == asked, "the owner was not asked");
    turn.expect(!notes.join("ideas.md").exists(), "ideas.md is gone");

    // A receipt signed by a key the policy does not declare does not count: the call
    // escalates, and the owner, asked, keeps the note.
    let stranger = SigningKey::from_seed(&[0x5a; 32]);
    let arguments = json!({"name": "private-diary.md"});
    let forged = Owner::sign_with(
        &stranger,
        "forged-1",
        "delete_note",
        &object(&arguments),
        &policy,
    );
    let asked = owner.asked();
    let o = turn
        .call(
            runtime,
            "delete a note with a receipt signed by an undeclared key",
            "delete_note",
            arguments,
            forged.ok(),
        )
        .await;
    turn.expect(
        denied_code(&o) == Some(ReasonCode::ApprovalRefused),
        "denied: the forged receipt did not count and the owner refused (approval_refused)",
    );
    turn.expect(owner.asked() == asked + 1, "the owner was asked once");

    turn.done = true;
    println!("\nnotes left: {:?}", notes_left(notes));
    turn.expect(
        notes_left(notes) == ["deploy.md", "private-diary.md"],
        "exactly the two approved deletes took effect",
    );
    if !turn.passed() {
        println!("\n{} expectation(s) failed:", turn.failures.len());
        for failure in &turn.failures {
            println!("  {failure}");
        }
    }
    turn
}
