//! The built-in tools, always driven through the executor (never by calling `invoke`): strict
//! schemas, honest static hints and `bash`'s per-call hints, reads anywhere and writes/edits
//! only inside the workspace (`..`, absolute paths and symlinks refused by the `preconditions`
//! stage), atomic writes, `edit`'s uniqueness rule, large outputs cut with a marker, and `bash`
//! on the in-process backend, whose report proves no containment: required containment denies
//! before anything runs, optional containment runs and the outcome records the degradation.
//! Containment enforced by the real subprocess backend is asserted on effects in the CLI's
//! tests (crates/cli/tests/support/exec.rs), where the `warden` binary hosts the helper.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use warden_contracts::*;
use warden_executor::{ActionExecutor, ExecutorBuilder, Registry, SnapshotPolicy, Tool};
use warden_policy::{Containment, Format, LoadedPolicy, PathEnv, PolicySnapshot};
use warden_sandbox::InProcessBackend;
use warden_tools::{BashTool, ListTool, ReadTool, TRUNCATION_MARKER, Workspace};

const ALLOW: &str = "default = \"allow\"\n";

/// The policy's `[containment]` table made optional: the in-process backend may run `bash`.
const OPTIONAL: &str = "[containment]\nwrite_roots = \"optional\"\nnetwork_off = \"optional\"\nenv_allowlist = \"optional\"\nprocess_isolation = \"optional\"\n";

fn snapshot(workspace: &Path, policy: &str) -> Arc<PolicySnapshot> {
    let file = LoadedPolicy::from_text(policy.into(), Format::Toml, "p.toml", "p", None).unwrap();
    let env = PathEnv {
        project_root: workspace.to_path_buf(),
        home: None,
    };
    Arc::new(PolicySnapshot::from_files(&[file], env).unwrap())
}

/// An executor over `registry` with `policy`, the in-process backend's report and the
/// policy's containment table applied to `bash`, as `warden exec` wires it.
fn executor_with(
    registry: Registry,
    workspace: &Path,
    policy: &str,
    configure: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
) -> ActionExecutor {
    let snapshot = snapshot(workspace, policy);
    let table = snapshot.containment().clone();
    let builder = ActionExecutor::builder(registry)
        .policy(Arc::new(SnapshotPolicy::new(snapshot).with_cwd(workspace)))
        .backend(InProcessBackend::new().capabilities().clone());
    let builder = warden_tools::PROCESS_TOOLS
        .iter()
        .fold(builder, |b, name| b.policy_containment_for(*name, &table));
    configure(builder).build().unwrap()
}

fn executor(workspace: &Path, policy: &str) -> ActionExecutor {
    let table = snapshot(workspace, policy).containment().clone();
    let mut registry = Registry::new();
    warden_tools::register_builtins_with(
        &mut registry,
        workspace,
        Arc::new(InProcessBackend::new()),
        &table,
    )
    .unwrap();
    executor_with(registry, workspace, policy, |b| b)
}

fn run(ex: &ActionExecutor, tool: &str, args: Value) -> ExecutionOutcome {
    let scope = ExecutionScopeRef::Ephemeral {
        scope_id: ScopeId::new("s").unwrap(),
    };
    let ctx = ExecutionContext::new(
        ContextId::new("c").unwrap(),
        scope.clone(),
        PrincipalRef {
            id: PrincipalId::new("me").unwrap(),
            kind: PrincipalKind::Local,
        },
        BackendRef::new("in_process").unwrap(),
    );
    let req = ExecutionRequest::new(
        RequestId::new("r").unwrap(),
        ActionRef::new(tool).unwrap(),
        args,
        scope,
    )
    .unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(ex.execute(req, &ctx))
}

fn result(o: &ExecutionOutcome) -> &Value {
    match o {
        ExecutionOutcome::Succeeded { result, .. } => result,
        other => panic!("expected success, got {other:?}"),
    }
}

fn denial(o: &ExecutionOutcome) -> &DecisionReason {
    match o {
        ExecutionOutcome::Denied { reason, .. } => reason,
        other => panic!("expected a denial, got {other:?}"),
    }
}

fn failure(o: &ExecutionOutcome) -> &Failure {
    match o {
        ExecutionOutcome::Failed {
            failure,
            call_executed: true,
            ..
        } => failure,
        other => panic!("expected a failure of the tool, got {other:?}"),
    }
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

// ---------------------------------------------------------------------------------------------
// Schemas and hints
// ---------------------------------------------------------------------------------------------

#[test]
fn descriptors_declare_strict_schemas_and_honest_hints() {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor(dir.path(), ALLOW);
    let d = |n: &str| {
        ex.registry()
            .resolve(&ActionRef::new(n).unwrap())
            .unwrap()
            .descriptor()
            .clone()
    };
    for name in ["read", "list"] {
        let h = d(name).hints().effective();
        assert!(
            h.read_only && !h.destructive && h.idempotent && !h.open_world,
            "{name}"
        );
    }
    let write = d("write").hints().effective();
    assert!(!write.read_only && write.destructive && write.idempotent && !write.open_world);
    let edit = d("edit").hints().effective();
    assert!(!edit.read_only && edit.destructive && !edit.idempotent && !edit.open_world);
    let bash = d("bash").hints().effective();
    assert!(!bash.read_only && bash.destructive && !bash.idempotent && bash.open_world);
    for name in ["bash", "edit", "list", "read", "write"] {
        assert_eq!(d(name).source(), &ActionSource::Builtin {});
        assert_eq!(
            d(name).input_schema()["additionalProperties"],
            false,
            "{name}"
        );
        assert!(!d(name).description().is_empty());
    }
    // Unknown, missing and ill-typed arguments never reach the tool.
    for (tool, args) in [
        ("read", json!({"path": "a", "mode": "x"})),
        ("read", json!({"path": "a", "offset": 0})),
        ("read", json!({"path": "a", "limit": "10"})),
        ("read", json!({"path": ""})),
        ("write", json!({"path": "a"})),
        ("write", json!({"path": "a", "content": 3})),
        ("edit", json!({"path": "a", "old": "", "new": "x"})),
        (
            "edit",
            json!({"path": "a", "old": "x", "new": "y", "replace_all": "yes"}),
        ),
        ("edit", json!({"path": "a", "old": "x"})),
        ("list", json!({})),
        ("bash", json!({"command": "ls", "timeout_ms": 0})),
        ("bash", json!({"command": "ls", "timeout_ms": 600_001})),
        ("bash", json!({"command": "ls", "cwd": "/"})),
    ] {
        let o = run(&ex, tool, args.clone());
        assert_eq!(
            denial(&o).code,
            ReasonCode::InvalidArguments,
            "{tool} {args}: {o:?}"
        );
    }
    assert!(!dir.path().join("a").exists());
}

#[test]
fn bash_per_call_hints_follow_the_shell_splitters_read_only_classification() {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor(dir.path(), ALLOW);
    let bash = ex
        .registry()
        .resolve(&ActionRef::new("bash").unwrap())
        .unwrap();
    let hints = |command: &str| {
        bash.hints_for(&obj(json!({"command": command})))
            .effective()
    };
    for ro in [
        "ls -la",
        "git status && git log --oneline | head -5",
        "cat README.md",
    ] {
        let h = hints(ro);
        assert!(
            h.read_only && !h.destructive && h.idempotent && !h.open_world,
            "{ro}"
        );
    }
    for rw in [
        "rm -rf build",
        "ls > listing.txt",
        "curl https://example.com",
        "ls; touch x",
        "echo $(rm x)",
        "unterminated 'quote",
    ] {
        let h = hints(rw);
        assert!(!h.read_only && h.destructive && h.open_world, "{rw}");
    }
    // Arguments failing the schema get the static, worst-case hints.
    let h = bash.hints_for(&obj(json!({"command": "ls", "extra": 1})));
    assert_eq!(h, bash.descriptor().hints());
    // The file tools' per-call hints are their static ones.
    let read = ex
        .registry()
        .resolve(&ActionRef::new("read").unwrap())
        .unwrap();
    assert!(
        read.hints_for(&obj(json!({"path": "x"})))
            .effective()
            .read_only
    );
}

// ---------------------------------------------------------------------------------------------
// read, write, edit, list
// ---------------------------------------------------------------------------------------------

#[test]
fn write_then_read_then_edit_inside_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor(dir.path(), ALLOW);
    let o = run(
        &ex,
        "write",
        json!({"path": "sub/notes.txt", "content": "hello\n"}),
    );
    assert_eq!(result(&o)["bytes"], 6);
    assert_eq!(result(&o)["created"], true);
    let file = dir.path().join("sub/notes.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\n");
    let o = run(&ex, "read", json!({"path": file.to_string_lossy()}));
    assert_eq!(result(&o)["content"], "hello\n");
    assert_eq!(result(&o)["truncated"], false);
    // Replacing is atomic (no temporary file left behind) and keeps the file's permissions.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let o = run(
        &ex,
        "write",
        json!({"path": "sub/notes.txt", "content": "one two two\n"}),
    );
    assert_eq!(result(&o)["created"], false);
    let o = run(
        &ex,
        "edit",
        json!({"path": "sub/notes.txt", "old": "one", "new": "1"}),
    );
    assert_eq!(result(&o)["replacements"], 1);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "1 two two\n");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o640
    );
    let names: Vec<String> = std::fs::read_dir(dir.path().join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["notes.txt"]);
    // A missing file is a typed failure of the tool.
    let o = run(&ex, "read", json!({"path": "missing.txt"}));
    assert_eq!(failure(&o).kind, "not_found");
    let o = run(&ex, "read", json!({"path": "sub"}));
    assert_eq!(failure(&o).kind, "is_a_directory");
    std::fs::write(dir.path().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
    let o = run(&ex, "read", json!({"path": "bin"}));
    assert_eq!(failure(&o).kind, "not_utf8");
}

#[test]
fn edit_refuses_an_old_text_that_is_missing_or_not_unique() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.txt");
    std::fs::write(&file, "a b a b a\n").unwrap();
    let ex = executor(dir.path(), ALLOW);
    let o = run(
        &ex,
        "edit",
        json!({"path": "f.txt", "old": "a", "new": "x"}),
    );
    let f = failure(&o);
    assert_eq!(f.kind, "old_not_unique");
    assert!(f.message.contains("3 times"), "{f:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "a b a b a\n");
    let o = run(
        &ex,
        "edit",
        json!({"path": "f.txt", "old": "zzz", "new": "x"}),
    );
    assert_eq!(failure(&o).kind, "old_not_found");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "a b a b a\n");
    // Identical texts are refused before anything runs.
    let o = run(
        &ex,
        "edit",
        json!({"path": "f.txt", "old": "a", "new": "a"}),
    );
    assert_eq!(denial(&o).code, ReasonCode::Precondition);
    // More context makes it unique; replace_all replaces every occurrence.
    let o = run(
        &ex,
        "edit",
        json!({"path": "f.txt", "old": "a b a\n", "new": "c\n"}),
    );
    assert_eq!(result(&o)["replacements"], 1);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "a b c\n");
    std::fs::write(&file, "a b a b a\n").unwrap();
    let o = run(
        &ex,
        "edit",
        json!({"path": "f.txt", "old": "a", "new": "x", "replace_all": true}),
    );
    assert_eq!(result(&o)["replacements"], 3);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x b x b x\n");
    // Editing a file that does not exist fails; nothing is created.
    let o = run(
        &ex,
        "edit",
        json!({"path": "nope.txt", "old": "a", "new": "x"}),
    );
    assert_eq!(failure(&o).kind, "not_found");
    assert!(!dir.path().join("nope.txt").exists());
}

#[test]
fn writes_and_edits_outside_the_workspace_are_refused_by_the_preconditions_stage() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "s").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink(&secret, dir.path().join("file-link")).unwrap();
    std::fs::create_dir(dir.path().join("a")).unwrap();
    let ex = executor(dir.path(), ALLOW);
    let abs = |p: &Path| p.to_string_lossy().into_owned();
    for (tool, args) in [
        ("write", json!({"path": "../x", "content": "x"})),
        ("write", json!({"path": "a/../../escape", "content": "x"})),
        ("write", json!({"path": "/etc/passwd", "content": "x"})),
        (
            "write",
            json!({"path": abs(&outside.path().join("new")), "content": "x"}),
        ),
        ("write", json!({"path": "link/new", "content": "x"})),
        ("write", json!({"path": "link/deeper/new", "content": "x"})),
        ("write", json!({"path": "file-link", "content": "x"})),
        ("write", json!({"path": ".", "content": "x"})),
        ("edit", json!({"path": "../x", "old": "s", "new": "x"})),
        (
            "edit",
            json!({"path": abs(&secret), "old": "s", "new": "x"}),
        ),
        (
            "edit",
            json!({"path": "link/secret", "old": "s", "new": "x"}),
        ),
        ("edit", json!({"path": "file-link", "old": "s", "new": "x"})),
    ] {
        let o = run(&ex, tool, args.clone());
        assert_eq!(
            denial(&o).code,
            ReasonCode::Precondition,
            "{tool} {args}: {o:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s");
    assert!(!outside.path().join("new").exists());
    assert!(!outside.path().join("deeper").exists());
    assert!(!dir.path().parent().unwrap().join("escape").exists());
    // A symlink that stays inside is followed; `..` that stays inside is fine.
    std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("inner")).unwrap();
    let o = run(
        &ex,
        "write",
        json!({"path": "inner/../a/f", "content": "ok"}),
    );
    assert!(o.is_success(), "{o:?}");
    let o = run(&ex, "write", json!({"path": "inner/g", "content": "ok"}));
    assert!(o.is_success(), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a/g")).unwrap(),
        "ok"
    );
    // Reads go anywhere: which paths may be read is the policy's to decide.
    let o = run(&ex, "read", json!({"path": "link/secret"}));
    assert_eq!(result(&o)["content"], "s");
    let o = run(&ex, "list", json!({"path": abs(outside.path())}));
    assert_eq!(result(&o)["entries"][0]["name"], "secret");
    let policy = format!(
        "default = \"allow\"\ndeny = [\"read({}/**)\"]\n",
        outside.path().display()
    );
    let ex = executor(dir.path(), &policy);
    let o = run(&ex, "read", json!({"path": abs(&secret)}));
    assert!(denial(&o).code != ReasonCode::Precondition, "{o:?}");
    let o = run(&ex, "read", json!({"path": "link/secret"}));
    assert!(matches!(o, ExecutionOutcome::Denied { .. }), "{o:?}");
}

#[test]
fn read_returns_a_window_of_lines_and_marks_what_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("ten.txt"), &text).unwrap();
    let ex = executor(dir.path(), ALLOW);
    let o = run(
        &ex,
        "read",
        json!({"path": "ten.txt", "offset": 3, "limit": 2}),
    );
    let r = result(&o);
    assert!(
        r["content"]
            .as_str()
            .unwrap()
            .starts_with("line 3\nline 4\n\n[warden: output truncated")
    );
    assert_eq!(r["lines"], 2);
    assert_eq!(r["next_offset"], 5);
    assert_eq!(r["truncated"], true);
    // To the end: nothing left out, no marker.
    let o = run(&ex, "read", json!({"path": "ten.txt", "offset": 9}));
    let r = result(&o);
    assert_eq!(r["content"], "line 9\nline 10\n");
    assert_eq!(r["truncated"], false);
    assert!(r.get("next_offset").is_none());
    // Past the end: nothing.
    let o = run(&ex, "read", json!({"path": "ten.txt", "offset": 99}));
    assert_eq!(result(&o)["lines"], 0);

    // A large file: the content stops at the byte budget and ends with the marker.
    let big = "x".repeat(100) + "\n";
    std::fs::write(dir.path().join("big.txt"), big.repeat(5_000)).unwrap();
    let o = run(&ex, "read", json!({"path": "big.txt"}));
    let r = result(&o);
    let content = r["content"].as_str().unwrap();
    assert!(content.len() < warden_tools::MAX_READ_OUTPUT_BYTES + 200);
    assert!(
        content.contains(TRUNCATION_MARKER),
        "{}",
        &content[content.len() - 200..]
    );
    assert_eq!(r["truncated"], true);
    let next = r["next_offset"].as_u64().unwrap();
    assert_eq!(next, r["lines"].as_u64().unwrap() + 1);
    // By lines too: the default limit.
    std::fs::write(dir.path().join("many.txt"), "x\n".repeat(3_000)).unwrap();
    let o = run(&ex, "read", json!({"path": "many.txt"}));
    assert_eq!(result(&o)["lines"], warden_tools::DEFAULT_READ_LINES);
    assert_eq!(
        result(&o)["next_offset"],
        warden_tools::DEFAULT_READ_LINES + 1
    );

    // A smaller budget cuts inside a line, on a character boundary.
    let mut registry = Registry::new();
    let ws = Workspace::new(dir.path()).unwrap();
    registry
        .register(Arc::new(
            ReadTool::new(ws).unwrap().with_max_output_bytes(5),
        ))
        .unwrap();
    std::fs::write(dir.path().join("utf8.txt"), "ééé\n").unwrap();
    let ex = executor_with(registry, dir.path(), ALLOW, |b| b);
    let o = run(&ex, "read", json!({"path": "utf8.txt"}));
    let content = result(&o)["content"].as_str().unwrap().to_owned();
    assert!(
        content.starts_with("éé\n[warden: output truncated after 4 bytes"),
        "{content}"
    );
    assert_eq!(result(&o)["next_offset"], 1);
}

#[test]
fn list_sorts_entries_with_their_kinds_and_says_what_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.txt"), "12345").unwrap();
    std::fs::create_dir(dir.path().join("a")).unwrap();
    std::os::unix::fs::symlink("/nowhere", dir.path().join("c")).unwrap();
    let ex = executor(dir.path(), ALLOW);
    let o = run(&ex, "list", json!({"path": "."}));
    let r = result(&o);
    assert_eq!(
        r["entries"],
        json!([
            {"name": "a", "kind": "dir"},
            {"name": "b.txt", "kind": "file", "bytes": 5},
            {"name": "c", "kind": "symlink"},
        ])
    );
    assert_eq!(r["truncated"], false);
    let o = run(&ex, "list", json!({"path": "b.txt"}));
    assert_eq!(failure(&o).kind, "not_a_directory");
    let o = run(&ex, "list", json!({"path": "missing"}));
    assert_eq!(failure(&o).kind, "not_found");

    let mut registry = Registry::new();
    let ws = Workspace::new(dir.path()).unwrap();
    registry
        .register(Arc::new(ListTool::new(ws).unwrap().with_max_entries(2)))
        .unwrap();
    let ex = executor_with(registry, dir.path(), ALLOW, |b| b);
    let o = run(&ex, "list", json!({"path": "."}));
    let r = result(&o);
    assert_eq!(r["entries"].as_array().unwrap().len(), 2);
    assert_eq!(r["truncated"], true);
    assert_eq!(r["omitted"], 1);
}

// ---------------------------------------------------------------------------------------------
// bash
// ---------------------------------------------------------------------------------------------

#[test]
fn bash_runs_in_the_workspace_on_the_in_process_backend_when_containment_is_optional() {
    let dir = tempfile::tempdir().unwrap();
    let policy = format!(
        "default = \"deny\"\nallow = [\"bash(echo:*)\", \"bash(pwd)\", \"bash(false)\", \"bash(sleep:*)\"]\n{OPTIONAL}"
    );
    let ex = executor(dir.path(), &policy);
    let o = run(&ex, "bash", json!({"command": "echo hello"}));
    assert_eq!(result(&o)["stdout"], "hello\n");
    assert_eq!(result(&o)["exit_code"], 0);
    // The in-process backend proves nothing: every optional mechanism is a degradation.
    let degraded: Vec<Capability> = o.degradations().iter().map(|e| e.capability).collect();
    assert_eq!(
        degraded,
        [
            Capability::FilesystemWriteRoots,
            Capability::EnvAllowlist,
            Capability::ProcessIsolation,
            Capability::DescriptorIsolation,
            Capability::NetworkOff,
            Capability::UnixSocketsOff,
        ]
    );
    assert!(
        o.degradations()
            .iter()
            .all(|e| e.status == CapabilityStatus::Unsupported)
    );
    let o = run(&ex, "bash", json!({"command": "pwd"}));
    let pwd = result(&o)["stdout"].as_str().unwrap().trim().to_owned();
    assert_eq!(Path::new(&pwd), std::fs::canonicalize(dir.path()).unwrap());
    let o = run(&ex, "bash", json!({"command": "false"}));
    assert_eq!(failure(&o).kind, "exit_status");
    assert_eq!(o.degradations().len(), 6, "a failure records it too");
    // Killed at its time limit.
    let started = std::time::Instant::now();
    let o = run(
        &ex,
        "bash",
        json!({"command": "sleep 20", "timeout_ms": 300}),
    );
    assert_eq!(failure(&o).kind, "timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // The policy decides before bash ever runs.
    let o = run(&ex, "bash", json!({"command": "touch made"}));
    assert_eq!(denial(&o).code, ReasonCode::PolicyDefault);
    assert!(o.degradations().is_empty());
    assert!(!dir.path().join("made").exists());
}

#[test]
fn required_containment_the_in_process_backend_cannot_prove_denies_before_bash_runs() {
    let dir = tempfile::tempdir().unwrap();
    // No [containment] table: everything required.
    let ex = executor(dir.path(), ALLOW);
    let o = run(&ex, "bash", json!({"command": "touch made"}));
    let reason = denial(&o);
    assert_eq!(reason.code, ReasonCode::Containment);
    for cap in ["filesystem_write_roots", "env_allowlist", "network_off"] {
        assert!(reason.message.contains(cap), "{reason:?}");
    }
    assert!(!dir.path().join("made").exists());
    // The file tools spawn nothing: the backend's containment does not apply to them.
    assert!(run(&ex, "write", json!({"path": "f", "content": "x"})).is_success());
    // One mechanism still required: denied, naming only that one.
    let policy = "default = \"allow\"\n[containment]\nwrite_roots = \"optional\"\nnetwork_off = \"allowed\"\nenv_allowlist = \"required\"\nprocess_isolation = \"optional\"\n";
    let ex = executor(dir.path(), policy);
    let o = run(&ex, "bash", json!({"command": "touch made"}));
    let reason = denial(&o);
    assert_eq!(reason.code, ReasonCode::Containment);
    assert!(reason.message.contains("env_allowlist"));
    assert!(!reason.message.contains("write_roots"));
    assert!(!dir.path().join("made").exists());
    // `network_off = "allowed"` asks for nothing: no degradation for it.
    let policy = "default = \"allow\"\n[containment]\nwrite_roots = \"optional\"\nnetwork_off = \"allowed\"\nenv_allowlist = \"optional\"\nprocess_isolation = \"optional\"\n";
    let ex = executor(dir.path(), policy);
    let o = run(&ex, "bash", json!({"command": "touch made"}));
    assert!(o.is_success(), "{o:?}");
    assert!(
        !o.degradations()
            .iter()
            .any(|e| e.capability == Capability::NetworkOff)
    );
    assert!(dir.path().join("made").exists());
}

#[test]
fn bash_asks_the_backend_for_the_containment_the_policy_describes() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let root = ws.root().to_string_lossy().into_owned();
    let backend = Arc::new(InProcessBackend::new());
    let strict = BashTool::new(ws.clone(), backend.clone()).unwrap();
    let spec = strict.process_spec("ls", None);
    assert_eq!(spec.program, "bash");
    assert_eq!(spec.args, ["-c", "ls"]);
    assert_eq!(spec.cwd, root);
    assert_eq!(spec.write_roots, std::slice::from_ref(&root));
    assert_eq!(spec.read_roots, None, "reads everywhere");
    assert!(!spec.network);
    assert_eq!(spec.env_allowlist, ["PATH", "HOME", "LANG", "TERM"]);
    assert_eq!(spec.timeout_ms, Some(warden_tools::DEFAULT_BASH_TIMEOUT_MS));
    assert_eq!(
        strict.process_spec("ls", Some(5)).timeout_ms,
        Some(5),
        "a call's timeout_ms wins"
    );
    let table = |network: &str| -> Containment {
        let text = format!(
            "default = \"allow\"\n[containment]\nnetwork_off = \"{network}\"\nenv = [\"PATH\"]\n"
        );
        snapshot(dir.path(), &text).containment().clone()
    };
    let allowed = BashTool::new(ws.clone(), backend.clone())
        .unwrap()
        .with_containment(table("allowed"));
    assert!(allowed.process_spec("ls", None).network);
    assert_eq!(allowed.process_spec("ls", None).env_allowlist, ["PATH"]);
    // Optional and not proven by this backend: ask for the network, run degraded.
    let optional = BashTool::new(ws.clone(), backend.clone())
        .unwrap()
        .with_containment(table("optional"));
    assert!(optional.process_spec("ls", None).network);
    let required = BashTool::new(ws, backend)
        .unwrap()
        .with_containment(table("required"));
    assert!(!required.process_spec("ls", None).network);
}

#[test]
fn bash_output_past_the_cap_is_cut_with_a_marker() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let mut registry = Registry::new();
    registry
        .register(Arc::new(
            BashTool::new(ws, Arc::new(InProcessBackend::new()))
                .unwrap()
                .with_max_output_bytes(1_000),
        ))
        .unwrap();
    let ex = executor_with(registry, dir.path(), &format!("{ALLOW}{OPTIONAL}"), |b| b);
    let o = run(
        &ex,
        "bash",
        json!({"command": "head -c 200000 /dev/zero | tr '\\0' a; echo done >&2"}),
    );
    let r = result(&o);
    let stdout = r["stdout"].as_str().unwrap();
    assert!(stdout.starts_with(&"a".repeat(1_000)), "{r}");
    assert!(
        stdout[1_000..].starts_with("\n[warden: output truncated after 1000 bytes"),
        "{r}"
    );
    assert_eq!(r["truncated"], true);
    assert_eq!(r["stopped"], "output_limit");
    // Within the cap: whole, no marker.
    let o = run(&ex, "bash", json!({"command": "printf 'short'"}));
    assert_eq!(result(&o)["stdout"], "short");
    assert_eq!(result(&o)["truncated"], false);
    assert!(result(&o).get("stopped").is_none());
}

#[test]
fn tools_implement_the_callable_trait_only() {
    // A compile-time check that each built-in is a `Tool` (invoked only by the executor).
    fn is_tool<T: Tool>() {}
    is_tool::<BashTool>();
    is_tool::<ReadTool>();
    is_tool::<ListTool>();
    is_tool::<warden_tools::WriteTool>();
    is_tool::<warden_tools::EditTool>();
}
