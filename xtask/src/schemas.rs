//! `cargo xtask schemas [--check]`: writes the JSON Schemas of the public types to
//! `docs/schemas/`, or (with `--check`) fails when a checked-in schema is stale or missing, or
//! when a schema file exists that no type generates.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;

/// Every schema the workspace publishes: file name → pretty JSON text.
pub(crate) fn expected() -> anyhow::Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    for s in warden_contracts::schema::all() {
        let mut text = serde_json::to_string_pretty(&s.schema)?;
        text.push('\n');
        files.insert(format!("{}.schema.json", s.name), text);
    }
    let mut policy = serde_json::to_string_pretty(&warden_policy::policy_file_schema())?;
    policy.push('\n');
    files.insert("PolicyFile.schema.json".to_owned(), policy);
    let mut spec = serde_json::to_string_pretty(&warden_harness::spec::schema())?;
    spec.push('\n');
    files.insert("HarnessSpec.schema.json".to_owned(), spec);
    Ok(files)
}

pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<bool> {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => anyhow::bail!("usage: cargo xtask schemas [--check]"),
    };
    let dir = root.join("docs").join("schemas");
    let expected = expected()?;
    if !check {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, text) in &expected {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        remove_orphans(&dir, &expected)?;
        println!("schemas: wrote {} files to docs/schemas/", expected.len());
        return Ok(true);
    }
    let mut stale = Vec::new();
    for (name, text) in &expected {
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(found) if &found == text => {}
            Ok(_) => stale.push(format!("docs/schemas/{name}: stale")),
            Err(_) => stale.push(format!("docs/schemas/{name}: missing")),
        }
    }
    for orphan in orphans(&dir, &expected)? {
        stale.push(format!("docs/schemas/{orphan}: no type generates it"));
    }
    if stale.is_empty() {
        println!("schemas: {} files up to date", expected.len());
        Ok(true)
    } else {
        for line in &stale {
            println!("{line}");
        }
        println!("schemas: run `cargo xtask schemas` and commit the result");
        Ok(false)
    }
}

fn orphans(dir: &Path, expected: &BTreeMap<String, String>) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".schema.json") && !expected.contains_key(&name) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

fn remove_orphans(dir: &Path, expected: &BTreeMap<String, String>) -> anyhow::Result<()> {
    for name in orphans(dir, expected)? {
        std::fs::remove_file(dir.join(&name)).with_context(|| format!("removing {name}"))?;
    }
    Ok(())
}
