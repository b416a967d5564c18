//! The built-in tools, always driven through the executor (never by calling `invoke`): schemas,
//! honest hints, paths resolved under the workspace (escapes refused by the guard stage),
//! atomic writes, and `bash` on the in-process backend.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use warden_contracts::*;
use warden_executor::{ActionExecutor, Registry, SnapshotPolicy};
use warden_policy::{Format, LoadedPolicy, PathEnv, PolicySnapshot};
use warden_sandbox::InProcessBackend;

fn executor(workspace: &Path, policy: &str) -> ActionExecutor {
    let mut registry = Registry::new();
    warden_tools::register_builtins(&mut registry, workspace, Arc::new(InProcessBackend::new()))
        .unwrap();
    let file = LoadedPolicy::from_text(policy.into(), Format::Toml, "p.toml", "p", None).unwrap();
    let env = PathEnv {
        project_root: workspace.to_path_buf(),
        home: None,
    };
    let snapshot = Arc::new(PolicySnapshot::from_files(&[file], env).unwrap());
    ActionExecutor::builder(registry)
        .policy(Arc::new(SnapshotPolicy::new(snapshot).with_cwd(workspace)))
        .backend(InProcessBackend::new().capabilities().clone())
        .build()
        .unwrap()
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

const ALLOW: &str = "default = \"allow\"\n";

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
    let read = d("read").hints().effective();
    assert!(read.read_only && !read.destructive && !read.open_world);
    let write = d("write").hints().effective();
    assert!(!write.read_only && write.destructive && !write.open_world);
    let bash = d("bash").hints().effective();
    assert!(!bash.read_only && bash.destructive && !bash.idempotent && bash.open_world);
    for name in ["read", "write", "bash"] {
        assert_eq!(d(name).source(), &ActionSource::Builtin {});
        assert_eq!(d(name).input_schema()["additionalProperties"], false);
    }
    // Unknown and missing arguments never reach the tool.
    let o = run(&ex, "read", json!({"path": "a", "mode": "x"}));
    assert_eq!(denial(&o).code, ReasonCode::InvalidArguments);
    let o = run(&ex, "write", json!({"path": "a"}));
    assert_eq!(denial(&o).code, ReasonCode::InvalidArguments);
    assert!(!dir.path().join("a").exists());
}

#[test]
fn write_then_read_under_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor(dir.path(), ALLOW);
    let o = run(
        &ex,
        "write",
        json!({"path": "sub/notes.txt", "content": "hello\n"}),
    );
    assert_eq!(result(&o)["bytes"], 6);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sub/notes.txt")).unwrap(),
        "hello\n"
    );
    let abs = dir.path().join("sub/notes.txt");
    let o = run(&ex, "read", json!({"path": abs.to_string_lossy()}));
    assert_eq!(result(&o)["content"], "hello\n");
    // Replacing is atomic: no temporary file is left behind.
    run(
        &ex,
        "write",
        json!({"path": "sub/notes.txt", "content": "bye"}),
    );
    let names: Vec<String> = std::fs::read_dir(dir.path().join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["notes.txt"]);
    // A missing file is a typed failure of the tool.
    let o = run(&ex, "read", json!({"path": "missing.txt"}));
    assert!(
        matches!(&o, ExecutionOutcome::Failed { failure, call_executed: true, .. } if failure.kind == "not_found"),
        "{o:?}"
    );
}

#[test]
fn paths_outside_the_workspace_are_refused_by_the_guard_stage() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    let ex = executor(dir.path(), ALLOW);
    for (tool, args) in [
        ("read", json!({"path": "../x"})),
        (
            "read",
            json!({"path": outside.path().join("secret").to_string_lossy()}),
        ),
        ("read", json!({"path": "link/secret"})),
        ("write", json!({"path": "link/new", "content": "x"})),
        ("write", json!({"path": "/etc/passwd", "content": "x"})),
        ("write", json!({"path": "a/../../escape", "content": "x"})),
    ] {
        let o = run(&ex, tool, args.clone());
        assert_eq!(denial(&o).code, ReasonCode::Guard, "{tool} {args}: {o:?}");
    }
    assert!(!outside.path().join("new").exists());
}

#[test]
fn bash_runs_in_the_workspace_on_the_in_process_backend() {
    let dir = tempfile::tempdir().unwrap();
    let ex = executor(
        dir.path(),
        "default = \"deny\"\nallow = [\"bash(echo:*)\", \"bash(pwd)\", \"bash(false)\"]\n",
    );
    let o = run(&ex, "bash", json!({"command": "echo hello"}));
    assert_eq!(result(&o)["stdout"], "hello\n");
    assert_eq!(result(&o)["exit_code"], 0);
    let o = run(&ex, "bash", json!({"command": "pwd"}));
    let pwd = result(&o)["stdout"].as_str().unwrap().trim().to_owned();
    assert_eq!(Path::new(&pwd), std::fs::canonicalize(dir.path()).unwrap());
    let o = run(&ex, "bash", json!({"command": "false"}));
    assert!(
        matches!(&o, ExecutionOutcome::Failed { failure, .. } if failure.kind == "exit_status"),
        "{o:?}"
    );
    // The policy decides before bash ever runs.
    let o = run(&ex, "bash", json!({"command": "touch made"}));
    assert_eq!(denial(&o).code, ReasonCode::PolicyDefault);
    assert!(!dir.path().join("made").exists());
}

#[test]
fn the_in_process_backend_claims_no_containment_so_requiring_it_denies() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = Registry::new();
    warden_tools::register_builtins(&mut registry, dir.path(), Arc::new(InProcessBackend::new()))
        .unwrap();
    let snapshot = Arc::new(
        PolicySnapshot::builder()
            .default(warden_policy::Decision::Allow)
            .build()
            .unwrap(),
    );
    let ex = ActionExecutor::builder(registry)
        .policy(Arc::new(SnapshotPolicy::new(snapshot)))
        .backend(InProcessBackend::new().capabilities().clone())
        .require_for("bash", Capability::FilesystemWriteRoots)
        .build()
        .unwrap();
    let o = run(&ex, "bash", json!({"command": "touch made"}));
    assert_eq!(denial(&o).code, ReasonCode::Containment);
    assert!(!dir.path().join("made").exists());
}
