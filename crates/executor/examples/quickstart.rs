//! The smallest embedded runtime: one tool of your own, a policy, and calls by name.
//!
//! Run it with `cargo run -p warden-executor --example quickstart`; it exits non-zero if a call
//! is not decided as the comments say.

use std::sync::Arc;

use serde_json::{Value, json};
use warden_contracts::{ActionDescriptor, ActionSource, Hints};
use warden_executor::{InvocationToken, Registry, Runtime, Tool, ToolError};
use warden_policy::PolicySnapshot;

/// A tool of your own: counts the words of its `text` argument.
struct WordCount(ActionDescriptor);

#[async_trait::async_trait]
impl Tool for WordCount {
    fn descriptor(&self) -> &ActionDescriptor {
        &self.0
    }

    // Only the executor can call this: it alone mints the token, after every check passed.
    async fn invoke(&self, _: InvocationToken, args: Value) -> Result<Value, ToolError> {
        let text = args["text"].as_str().unwrap_or_default();
        Ok(json!({ "words": text.split_whitespace().count() }))
    }
}

const POLICY: &str = r#"
default = "deny"
allow = ["word_count"]

[guards]
secrets = "block"
"#;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = Arc::new(PolicySnapshot::from_toml(POLICY, std::env::current_dir()?)?);
    let read_only = Hints {
        read_only: Some(true),
        open_world: Some(false),
        ..Hints::UNKNOWN
    };
    let descriptor =
        ActionDescriptor::new("word_count", "1", ActionSource::Builtin {})?.with_hints(read_only);
    let mut tools = Registry::new();
    tools.register(Arc::new(WordCount(descriptor)))?;
    let runtime = Runtime::builder(policy).tools(tools).build().await?;

    // Allowed by the policy: it runs.
    let counted = runtime
        .execute("word_count", json!({"text": "to be or not"}))
        .await;
    println!("word_count: {}", counted.status());
    // Not allowed (the default denies): it never runs.
    let refused = runtime.execute("delete_files", json!({"path": "/"})).await;
    println!("delete_files: {}", refused.status());
    // Allowed, but carrying a secret: the policy's [guards] refuse it before it runs.
    let token = format!("ghp_{}", "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5");
    let leaked = runtime
        .execute("word_count", json!({ "text": token }))
        .await;
    println!("word_count with a secret: {}", leaked.status());

    if !counted.is_success() || refused.status() != "denied" || leaked.status() != "denied" {
        return Err("a call was not decided as the policy says".into());
    }
    Ok(())
}
