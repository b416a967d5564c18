//! `cargo xtask bench [--quick]`: the benches behind docs/benchmarks.md, run once, and the page's
//! tables rewritten from that one run.
//!
//! 1. builds the release `warden` and `policy-compare` binaries;
//! 2. `policy-compare agree`: Warden, Cedar and Rego answer every generated call alike (10
//!    rules; 1,000 too without `--quick`); a disagreement fails the run before anything is
//!    written;
//! 3. the criterion benches ([`BENCHES`]): decisions (`warden-policy` decide and shell), the
//!    comparison (`warden-policy-compare`), executor overhead and evidence;
//! 4. whole processes: `warden check --calls` against the Cedar and Rego programs on the same
//!    generated policy and calls file, start-up subtracted ([`whole_process`]);
//! 5. rewrites the rows this command owns in docs/benchmarks.md (each table's other rows, such
//!    as policy load and hook latency, are kept as they are: [`rewrite_table`]) and appends
//!    the run, every raw figure with the machine and its load, to docs/bench-log/runs.md.
//!
//! `--quick` (under two minutes once built): short warm-up and measurement, the smallest
//! sizes (decisions at 10 rules, the comparison at 10 and 1,000), no SQLite benches; rows it
//! does not measure keep their figure and their date.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};

use crate::ci::{cargo_program, command};

/// One criterion bench run: package, bench target, filter, and whether `--quick` runs it.
struct Bench {
    package: &'static str,
    bench: &'static str,
    /// The filter without `--quick`, and with it (`None`: not run).
    filter: &'static str,
    quick_filter: Option<&'static str>,
}

/// The criterion benches behind the page's tables.
const BENCHES: &[Bench] = &[
    Bench {
        package: "warden-policy",
        bench: "decide",
        filter: "^decide/.*/(10|10000)$",
        quick_filter: Some("^decide/.*/10$"),
    },
    Bench {
        package: "warden-policy",
        bench: "shell",
        filter: "^shell_decide_.*/5$",
        quick_filter: Some("^shell_decide_.*/5$"),
    },
    Bench {
        package: "warden-policy-compare",
        bench: "compare",
        filter: "^compare/",
        quick_filter: Some("^compare/"),
    },
    Bench {
        package: "warden-executor",
        bench: "overhead",
        filter: "^executor_overhead/",
        quick_filter: Some("^executor_overhead/"),
    },
    Bench {
        package: "warden-evidence",
        bench: "evidence",
        filter: "^(memory_chain/verify_10k_records|single_append_latency/sqlite_full|sqlite_full_group_commit/(pipelined_appenders/16|concurrent_appenders/128))$",
        quick_filter: Some("^memory_chain/verify_10k_records$"),
    },
];

/// How long criterion warms up and measures, and its sample count.
struct Timing {
    warm_up: &'static str,
    measurement: &'static str,
    samples: &'static str,
}

const FULL: Timing = Timing {
    warm_up: "2",
    measurement: "4",
    samples: "50",
};

const QUICK: Timing = Timing {
    warm_up: "0.3",
    measurement: "0.8",
    samples: "10",
};

/// The calls each whole-process run decides: 20,000 for Warden; for the peers, whose cost
/// grows with the rules, fewer at larger sizes (a per-call figure either way).
const CALLS: usize = 20_000;

pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<bool> {
    let quick = match args {
        [] => false,
        [flag] if flag == "--quick" => true,
        _ => bail!("usage: cargo xtask bench [--quick]"),
    };
    let started = SystemTime::now();
    let clock = Instant::now();
    let machine = Machine::now();
    println!(
        "==> bench: {} ({} cores, load {}), {}",
        machine.cpu, machine.cores, machine.load, machine.rustc
    );
    // Two builds: built together, Cedar's serde_json features (`preserve_order`) would reach
    // the `warden` binary, which would then not be the product's.
    for build in [
        ["build", "--release", "-p", "warden-cli", "--bin", "warden"],
        [
            "build",
            "--release",
            "-p",
            "warden-policy-compare",
            "--bin",
            "policy-compare",
        ],
    ] {
        if !cargo(root, &build, &[])? {
            bail!("the release binaries do not build");
        }
    }
    let target = target_dir(root);
    let compare = target.join("release/policy-compare");
    let mut log = String::new();
    for n in if quick { &[10][..] } else { &[10, 1_000][..] } {
        let out = command(&compare)
            .args(["agree", &n.to_string()])
            .output()
            .context("running policy-compare agree")?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        print!("{text}");
        let _ = writeln!(log, "- `policy-compare agree {n}`: {}", text.trim());
        if !out.status.success() {
            eprintln!("bench: Warden, Cedar and Rego disagree; nothing is written");
            return Ok(false);
        }
    }
    let timing = if quick { QUICK } else { FULL };
    let mut failed = Vec::new();
    for b in BENCHES {
        let Some(filter) = (if quick {
            b.quick_filter
        } else {
            Some(b.filter)
        }) else {
            continue;
        };
        let sizes = if quick { "10,1000" } else { "10,1000,10000" };
        let args = [
            "bench",
            "-p",
            b.package,
            "--bench",
            b.bench,
            "--",
            filter,
            "--warm-up-time",
            timing.warm_up,
            "--measurement-time",
            timing.measurement,
            "--sample-size",
            timing.samples,
            "--noplot",
        ];
        println!("==> bench: {} {}", b.package, b.bench);
        if !cargo(root, &args, &[("COMPARE_SIZES", sizes)])? {
            failed.push(format!("{}/{}", b.package, b.bench));
        }
    }
    let results = Results::read(&target.join("criterion"), started)?;
    let sizes: &[usize] = if quick {
        &[10, 1_000]
    } else {
        &[10, 1_000, 10_000]
    };
    let processes = whole_process(&target, sizes, if quick { 3 } else { 7 })?;
    let date = machine.date.clone();
    let stamp = format!(
        "{}, {date}{}",
        machine.name,
        if quick { ", quick" } else { "" }
    );
    let page_path = root.join("docs/benchmarks.md");
    let mut page = std::fs::read_to_string(&page_path).context("reading docs/benchmarks.md")?;
    for (heading, rows) in tables(&results, &processes, &stamp) {
        page = rewrite_table(&page, heading, &rows)?;
    }
    page = current_as_of(&page, &date);
    std::fs::write(&page_path, page).context("writing docs/benchmarks.md")?;
    let entry = log_entry(
        &machine,
        quick,
        &log,
        &results,
        &processes,
        &failed,
        clock.elapsed(),
    );
    let log_path = root.join("docs/bench-log/runs.md");
    let mut runs = std::fs::read_to_string(&log_path).context("reading docs/bench-log/runs.md")?;
    runs.push_str(&entry);
    std::fs::write(&log_path, runs).context("writing docs/bench-log/runs.md")?;
    println!(
        "==> bench: docs/benchmarks.md and docs/bench-log/runs.md written in {:.0} s",
        clock.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        eprintln!("bench: these benches failed, their rows keep the figures they had: {failed:?}");
    }
    Ok(failed.is_empty())
}

fn cargo(root: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<bool> {
    let status = command(cargo_program())
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    Ok(status.success())
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// The machine the run is on, as the page names it.
struct Machine {
    /// The CPU model as /proc/cpuinfo gives it.
    cpu: String,
    /// The page's short name (`Xeon`, `EPYC`, else `2 vCPUs`-style).
    name: String,
    cores: usize,
    /// The 1, 5 and 15 minute load averages when the run started.
    load: String,
    rustc: String,
    /// Today, UTC, `YYYY-MM-DD`.
    date: String,
}

impl Machine {
    fn now() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                    .map(|(_, m)| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let name = if cpu.contains("EPYC") {
            "EPYC".to_owned()
        } else if cpu.contains("Xeon") {
            "Xeon".to_owned()
        } else {
            format!("{cores} vCPUs")
        };
        let load = std::fs::read_to_string("/proc/loadavg")
            .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "unknown".into());
        let rustc = command("rustc")
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|_| "rustc (unknown version)".into());
        let days = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86_400);
        Self {
            cpu,
            name,
            cores,
            load,
            rustc,
            date: civil_date(days),
        }
    }
}

/// `YYYY-MM-DD` of a day counted from 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_date(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// One criterion estimate: the median and its confidence interval, in nanoseconds, and the
/// elements an iteration processes when the bench declares a throughput.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    low: f64,
    median: f64,
    high: f64,
    elements: Option<f64>,
}

impl Estimate {
    /// Elements per second at the median (and at the interval's ends: high, low).
    fn per_second(&self) -> Option<(f64, f64, f64)> {
        let e = self.elements?;
        Some((
            e * 1e9 / self.median,
            e * 1e9 / self.high,
            e * 1e9 / self.low,
        ))
    }
}

/// Every estimate this run wrote, by criterion id (`decide/allow_path/10`).
struct Results(BTreeMap<String, Estimate>);

impl Results {
    /// Reads `target/criterion/**/new/estimates.json` written since `since` (an older one is a
    /// bench this run did not measure).
    fn read(dir: &Path, since: SystemTime) -> anyhow::Result<Self> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.file_name().is_none_or(|n| n != "estimates.json")
                    || path
                        .parent()
                        .and_then(Path::file_name)
                        .is_none_or(|n| n != "new")
                {
                    continue;
                }
                let fresh = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|m| m >= since);
                if !fresh {
                    continue;
                }
                let Some(new) = path.parent() else { continue };
                let json = |name: &str| -> anyhow::Result<serde_json::Value> {
                    let text = std::fs::read_to_string(new.join(name))
                        .with_context(|| format!("reading {}", new.join(name).display()))?;
                    Ok(serde_json::from_str(&text)?)
                };
                let estimates = json("estimates.json")?;
                let benchmark = json("benchmark.json")?;
                let median = &estimates["median"];
                let (Some(m), Some(lo), Some(hi), Some(id)) = (
                    median["point_estimate"].as_f64(),
                    median["confidence_interval"]["lower_bound"].as_f64(),
                    median["confidence_interval"]["upper_bound"].as_f64(),
                    benchmark["full_id"].as_str(),
                ) else {
                    continue;
                };
                out.insert(
                    id.to_owned(),
                    Estimate {
                        low: lo,
                        median: m,
                        high: hi,
                        elements: benchmark["throughput"]["Elements"].as_f64(),
                    },
                );
            }
        }
        Ok(Self(out))
    }

    fn get(&self, id: &str) -> Option<Estimate> {
        self.0.get(id).copied()
    }

    /// The range of the medians of `ids` (ns), when every one was measured.
    fn range(&self, ids: &[String]) -> Option<(f64, f64)> {
        let medians: Option<Vec<f64>> = ids.iter().map(|id| Some(self.get(id)?.median)).collect();
        let medians = medians?;
        let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = medians.iter().copied().fold(0.0, f64::max);
        Some((lo, hi))
    }
}

/// One engine's whole-process figures at one size.
#[derive(Debug, Clone, Copy)]
struct Process {
    /// Start-up and policy load: the run on a one-call file (median, seconds).
    start: f64,
    /// Per call with the start-up subtracted (seconds).
    per_call: f64,
    calls: usize,
}

/// Whole-process runs at each size: `warden check --calls … --format json`, and the Cedar and
/// Rego programs, on the same policy and calls; each timed `runs` times on the calls file and
/// on a one-call file (medians), output to /dev/null, as CPU time ([`cpu_time`]). Warden
/// also decides the same number of calls without the shell commands.
fn whole_process(
    target: &Path,
    sizes: &[usize],
    runs: usize,
) -> anyhow::Result<BTreeMap<(usize, &'static str), Process>> {
    let warden = target.join("release/warden");
    let compare = target.join("release/policy-compare");
    let mut out = BTreeMap::new();
    for &n in sizes {
        let dir = target.join(format!("bench-compare/{n}"));
        let peer_calls = (2_000_000 / n).clamp(100, CALLS);
        for (engine, count) in [
            ("warden", CALLS),
            ("cedar", peer_calls),
            ("rego", peer_calls / 4),
        ] {
            let sub = dir.join(engine);
            let status = command(&compare)
                .arg("write")
                .arg(&sub)
                .args([n.to_string(), count.to_string()])
                .status()
                .context("running policy-compare write")?;
            if !status.success() {
                bail!("policy-compare write failed");
            }
            let program = |calls: &str| match engine {
                "warden" => {
                    let mut c = command(&warden);
                    c.arg("check")
                        .arg("--policy")
                        .arg(sub.join("warden.toml"))
                        .arg("--calls")
                        .arg(sub.join(calls))
                        .args(["--format", "json"]);
                    c
                }
                peer => {
                    let mut c = command(&compare);
                    c.arg(peer)
                        .arg(sub.join(format!("policy.{peer}")))
                        .arg(sub.join(calls));
                    c
                }
            };
            let time = |calls: &str| -> anyhow::Result<f64> {
                let mut times = Vec::with_capacity(runs);
                for _ in 0..runs {
                    times.push(cpu_time(&program(calls))?);
                }
                times.sort_by(f64::total_cmp);
                Ok(times[times.len() / 2])
            };
            let start = time("one.jsonl")?;
            let all = time("calls.jsonl")?;
            let per_call = (all - start).max(0.0) / count as f64;
            if engine == "warden" {
                let plain = time("calls-noshell.jsonl")?;
                let plain = (plain - start).max(0.0) / count as f64;
                println!(
                    "==> bench: whole process, warden at {n} rules without shell commands: {} a call",
                    duration(plain * 1e9)
                );
                out.insert(
                    (n, "warden-noshell"),
                    Process {
                        start,
                        per_call: plain,
                        calls: count,
                    },
                );
            }
            println!(
                "==> bench: whole process, {engine} at {n} rules: start {} , {} a call ({count} calls)",
                duration(start * 1e9),
                duration(per_call * 1e9)
            );
            out.insert(
                (n, engine),
                Process {
                    start,
                    per_call,
                    calls: count,
                },
            );
        }
    }
    Ok(out)
}

/// The CPU time (user and system, seconds) `program` takes, its output to /dev/null: bash's
/// `time` reports its child's resource usage. CPU time rather than wall time, because the
/// machines are shared: a busy host stretches wall time far more than CPU time.
fn cpu_time(program: &std::process::Command) -> anyhow::Result<f64> {
    let out = command("bash")
        .args([
            "-c",
            "TIMEFORMAT='%3U %3S'; time \"$@\" > /dev/null",
            "bench",
        ])
        .arg(program.get_program())
        .args(program.get_args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .context("running a whole process under bash's time")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!(
            "{} exited with {}: {stderr}",
            program.get_program().to_string_lossy(),
            out.status
        );
    }
    let last = stderr.lines().last().unwrap_or_default();
    let mut parts = last.split_whitespace().map(str::parse::<f64>);
    match (parts.next(), parts.next()) {
        (Some(Ok(user)), Some(Ok(system))) => Ok(user + system),
        _ => bail!("no CPU time in bash's output: {stderr}"),
    }
}

/// A duration in nanoseconds, three significant digits: `630 ns`, `2.61 µs`, `1.37 ms`.
fn duration(ns: f64) -> String {
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if v >= 100.0 {
        format!("{v:.0} {unit}")
    } else if v >= 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

/// A whole number with thousands separators: `61,200`.
/// A throughput and its interval: `66,000 records/s [61,400–69,500]`.
fn records_per_s(m: f64, lo: f64, hi: f64) -> String {
    format!(
        "{} records/s [{}–{}]",
        thousands(m),
        thousands(lo),
        thousands(hi)
    )
}

fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A ratio: `4.2×`, `21×`, `8,100×` (two significant digits from 10 on).
fn ratio(r: f64) -> String {
    if r < 10.0 {
        format!("{r:.1}×")
    } else {
        let magnitude = 10f64.powi(r.log10().floor() as i32 - 1);
        format!("{}×", thousands((r / magnitude).round() * magnitude))
    }
}

fn yes(met: bool) -> &'static str {
    if met { "**yes**" } else { "**no**" }
}

/// A figure and its confidence interval: `3.10 µs [3.02–3.21]`.
fn with_interval(e: Estimate) -> String {
    format!(
        "{} [{}–{}]",
        duration(e.median),
        duration(e.low),
        duration(e.high)
    )
}

/// The rows this command owns, by the heading of the table they are in. A row is its key (the
/// start of its first cell, which the rewriter matches) and its full text.
fn tables(
    r: &Results,
    p: &BTreeMap<(usize, &'static str), Process>,
    stamp: &str,
) -> Vec<(&'static str, Vec<(String, String)>)> {
    let row = |key: &str, figure: String, target: &str, met: &str, cmd: &str| {
        (
            key.to_owned(),
            format!("| {key} | {figure} | {target} | {met} | {cmd} | {stamp} |"),
        )
    };
    let ids = |names: &[&str], n: usize| -> Vec<String> {
        names.iter().map(|c| format!("decide/{c}/{n}")).collect()
    };
    let non_shell = ["allow_path", "deny_path", "nomatch_path", "nomatch_domain"];
    let shell = ["allow_shell", "deny_shell"];
    let span = |(lo, hi): (f64, f64)| {
        let (lo, hi) = (duration(lo), duration(hi));
        match (lo.split_once(' '), hi.split_once(' ')) {
            (Some((l, lu)), Some((h, hu))) if lu == hu => format!("{l}–{h} {hu}"),
            _ => format!("{lo}–{hi}"),
        }
    };
    let mut decisions = Vec::new();
    let (ns10, ns10k) = (
        r.range(&ids(&non_shell, 10)),
        r.range(&ids(&non_shell, 10_000)),
    );
    let flat = |a: Option<(f64, f64)>, b: Option<(f64, f64)>| match (a, b) {
        (Some(a), Some(b)) => yes(b.1 <= a.1 * 1.5),
        _ => "—",
    };
    if let Some(x) = ns10 {
        decisions.push(row(
            "non-shell call, 10 rules",
            span(x),
            "flat in the number of rules",
            flat(ns10, ns10k),
            "`cargo bench -p warden-policy --bench decide -- '(path\\|domain)/10$'`",
        ));
    }
    if let Some(x) = ns10k {
        decisions.push(row(
            "non-shell call, 10,000 rules",
            format!("**{}**", span(x)),
            "< 1 µs at 10,000 rules of mixed kinds",
            yes(x.1 < 1_000.0),
            "`cargo bench -p warden-policy --bench decide -- '(path\\|domain)/10000$'`",
        ));
    }
    let (sh10, sh10k) = (r.range(&ids(&shell, 10)), r.range(&ids(&shell, 10_000)));
    if let Some(x) = sh10 {
        decisions.push(row(
            "shell call (one command), 10 rules",
            span(x),
            "none of its own (see the 5-subcommand row)",
            "—",
            "`cargo bench -p warden-policy --bench decide -- 'shell/10$'`",
        ));
    }
    if let Some(x) = sh10k {
        decisions.push(row(
            "shell call (one command), 10,000 rules",
            span(x),
            "flat in the number of rules",
            flat(sh10, sh10k),
            "`cargo bench -p warden-policy --bench decide -- 'shell/10000$'`",
        ));
    }
    if let (Some(plain), Some(mixed)) =
        (r.get("shell_decide_plain/5"), r.get("shell_decide_mixed/5"))
    {
        decisions.push(row(
            "a `bash` command of 5 subcommands, parse included (16 rules; `plain` / `mixed` commands, [shell.md](shell.md#benchmarks))",
            format!("**{} / {}**", duration(plain.median), duration(mixed.median)),
            "< 20 µs",
            yes(plain.median.max(mixed.median) < 20_000.0),
            "`cargo bench -p warden-policy --bench shell -- 'decide_.*/5$'`",
        ));
    }
    let engine = |e: &str, n: usize| r.get(&format!("compare/{e}/{n}"));
    if let (Some(w10), Some(c10)) = (engine("warden", 10), engine("cedar", 10)) {
        let big = engine("warden", 10_000).zip(engine("cedar", 10_000));
        let r10 = c10.median / w10.median;
        let (text, met) = match big {
            Some((w, c)) => {
                let rbig = c.median / w.median;
                (
                    format!(
                        "**{} at 10 rules, {} at 10,000** (table below)",
                        ratio(r10),
                        ratio(rbig)
                    ),
                    yes(r10 >= 10.0 && rbig >= 1_000.0),
                )
            }
            None => (
                format!("**{} at 10 rules** (table below)", ratio(r10)),
                yes(r10 >= 10.0),
            ),
        };
        decisions.push(row(
            "against `cedar-policy` on an equivalent policy",
            text,
            "≥ 10× faster at 10 rules, ≥ 1,000× at 10,000",
            met,
            "`cargo bench -p warden-policy-compare --bench compare`",
        ));
    }
    let mut peers = Vec::new();
    for n in [10, 1_000, 10_000] {
        let (Some(w), Some(c), Some(g)) =
            (engine("warden", n), engine("cedar", n), engine("rego", n))
        else {
            continue;
        };
        let (target, met) = match n {
            10 => ("≥ 10× Cedar", yes(c.median / w.median >= 10.0)),
            10_000 => ("≥ 1,000× Cedar", yes(c.median / w.median >= 1_000.0)),
            _ => ("—", "—"),
        };
        peers.push(row(
            &format!(
                "one decision, {} rules: Warden / Cedar / Rego",
                thousands(n as f64)
            ),
            format!(
                "{} / {} / {} (Cedar {}, Rego {})",
                duration(w.median),
                duration(c.median),
                duration(g.median),
                ratio(c.median / w.median),
                ratio(g.median / w.median)
            ),
            target,
            met,
            &format!("`cargo bench -p warden-policy-compare --bench compare -- '/{n}$'`"),
        ));
    }
    for n in [10, 1_000, 10_000] {
        let (Some(w), Some(c), Some(g)) = (
            p.get(&(n, "warden")),
            p.get(&(n, "cedar")),
            p.get(&(n, "rego")),
        ) else {
            continue;
        };
        peers.push(row(
            &format!("whole process, {} rules", thousands(n as f64)),
            format!(
                "CPU time per call (start-up subtracted), Warden / Cedar / Rego: {} / {} / {} (Cedar {}, Rego {}); start-up and load: {} / {} / {}",
                duration(w.per_call * 1e9),
                duration(c.per_call * 1e9),
                duration(g.per_call * 1e9),
                ratio(c.per_call / w.per_call),
                ratio(g.per_call / w.per_call),
                duration(w.start * 1e9),
                duration(c.start * 1e9),
                duration(g.start * 1e9),
            ),
            "—",
            "—",
            "`cargo xtask bench`",
        ));
    }
    let mut check = Vec::new();
    let per_call: Vec<(usize, Process)> = [10, 10_000]
        .into_iter()
        .filter_map(|n| Some((n, *p.get(&(n, "warden"))?)))
        .collect();
    if !per_call.is_empty() {
        let figures: Vec<String> = per_call
            .iter()
            .map(|(n, w)| {
                let plain = p
                    .get(&(*n, "warden-noshell"))
                    .map(|x| {
                        format!(
                            " ({} without the shell commands)",
                            duration(x.per_call * 1e9)
                        )
                    })
                    .unwrap_or_default();
                format!(
                    "{} at {} rules{plain}",
                    duration(w.per_call * 1e9),
                    thousands(*n as f64)
                )
            })
            .collect();
        let calls = per_call[0].1.calls;
        check.push(row(
            "`warden check --calls`, per call",
            format!(
                "**{}**: CPU time, {} generated calls of every rule kind, about 30 % of them shell commands, JSON output, start-up subtracted",
                figures.join(", "),
                thousands(calls as f64)
            ),
            "< 1.5 µs per call",
            if per_call.iter().all(|(_, w)| w.per_call < 1.5e-6) {
                "**yes**"
            } else if per_call.iter().all(|(n, _)| {
                p.get(&(*n, "warden-noshell"))
                    .is_some_and(|x| x.per_call < 1.5e-6)
            }) {
                "without the shell commands"
            } else {
                "**no**"
            },
            "`cargo xtask bench` (whole process: the table above)",
        ));
    }
    let mut executor = Vec::new();
    let overhead = |id: &str| r.get(&format!("executor_overhead/{id}"));
    if let Some(d) = overhead("direct_call") {
        executor.push(row(
            "the tool's function called directly (`direct_call`, the peer)",
            duration(d.median),
            "—",
            "—",
            "`cargo bench -p warden-executor --bench overhead -- direct_call`",
        ));
        if let Some(a) = overhead("executor_allow_all") {
            executor.push(row(
                "executor overhead, minimal profile: all stages with an allow-everything evaluator, no evidence (`executor_allow_all` minus the direct call)",
                format!("**≈ {}** ({} − {})", duration(a.median - d.median), duration(a.median), duration(d.median)),
                "< 5 µs",
                yes(a.median - d.median < 5_000.0),
                "`cargo bench -p warden-executor --bench overhead -- 'direct_call\\|executor_allow_all'`",
            ));
        }
    }
    for (key, id) in [
        (
            "the same, with a compiled 12-rule policy deciding (`executor_snapshot_policy`)",
            "executor_snapshot_policy",
        ),
        (
            "the same, plus capacity limits and an observer (`executor_policy_limits_observer`)",
            "executor_policy_limits_observer",
        ),
    ] {
        if let Some(e) = overhead(id) {
            executor.push(row(
                key,
                format!("{} a call", duration(e.median)),
                "—",
                "—",
                &format!("`cargo bench -p warden-executor --bench overhead -- {id}`"),
            ));
        }
    }
    let mut governed = Vec::new();
    if let Some(g) = overhead("executor_governed_memory_store") {
        governed.push(row(
            "a governed call over the in-memory store (`executor_governed_memory_store`)",
            with_interval(g),
            "none",
            "—",
            "`cargo bench -p warden-executor --bench overhead -- executor_governed_memory_store`",
        ));
    }
    let mut evidence = Vec::new();
    let rate = |id: &str| r.get(id).and_then(|e| e.per_second());
    if let Some((m, lo, hi)) = rate("sqlite_full_group_commit/pipelined_appenders/16") {
        evidence.push(row(
            "SQLite, `synchronous=FULL` with group commit, pipelining appenders: durable records/s",
            format!(
                "**{}** [{}–{}], 16 appenders",
                thousands(m),
                thousands(lo),
                thousands(hi)
            ),
            "≥ 50,000 under concurrent appenders",
            yes(m >= 50_000.0),
            "`cargo bench -p warden-evidence --bench evidence -- 'pipelined_appenders/16$'`",
        ));
    }
    if let Some((m, lo, hi)) = rate("sqlite_full_group_commit/concurrent_appenders/128") {
        evidence.push(row(
            "SQLite, 128 appenders that each wait for their receipt (`concurrent_appenders/128`)",
            records_per_s(m, lo, hi),
            "—",
            "—",
            "`cargo bench -p warden-evidence --bench evidence -- 'concurrent_appenders/128$'`",
        ));
    }
    if let Some(e) = r.get("single_append_latency/sqlite_full") {
        evidence.push(row(
            "SQLite, one durable append (`single_append_latency/sqlite_full`)",
            with_interval(e),
            "tracked, no number set",
            "—",
            "`cargo bench -p warden-evidence --bench evidence -- single_append_latency/sqlite_full`",
        ));
    }
    if let Some((m, lo, hi)) = rate("memory_chain/verify_10k_records") {
        evidence.push(row(
            "verifying a chain (`verify_10k_records`)",
            records_per_s(m, lo, hi),
            "—",
            "—",
            "`cargo bench -p warden-evidence --bench evidence -- verify_10k_records`",
        ));
    }
    vec![
        ("## Decisions on a compiled snapshot", decisions),
        ("### Against Cedar and Rego", peers),
        ("## Executor overhead", executor),
        ("## Governed call cost", governed),
        ("## Evidence", evidence),
        ("## `warden check --calls` and replay", check),
    ]
}

/// Rewrites the first table after the line `heading`: a row whose first cell starts with an
/// owned row's key is replaced by it, owned rows not there yet are appended, and every other
/// row is kept where it is.
fn rewrite_table(page: &str, heading: &str, rows: &[(String, String)]) -> anyhow::Result<String> {
    if rows.is_empty() {
        return Ok(page.to_owned());
    }
    let lines: Vec<&str> = page.lines().collect();
    let Some(at) = lines.iter().position(|l| l.trim_end() == heading) else {
        bail!("docs/benchmarks.md has no heading `{heading}`");
    };
    let Some(header) = (at + 1..lines.len()).find(|&i| lines[i].starts_with('|')) else {
        bail!("no table after `{heading}`");
    };
    let body = header + 2;
    let end = (body..lines.len())
        .find(|&i| !lines[i].starts_with('|'))
        .unwrap_or(lines.len());
    let mut table: Vec<String> = Vec::new();
    let mut used = vec![false; rows.len()];
    for line in &lines[body..end] {
        let first = line.strip_prefix("| ").unwrap_or(line);
        match rows
            .iter()
            .position(|(key, _)| first.starts_with(key.as_str()))
        {
            Some(i) if !used[i] => {
                used[i] = true;
                table.push(rows[i].1.clone());
            }
            Some(_) => {}
            None => table.push((*line).to_owned()),
        }
    }
    for (i, (_, row)) in rows.iter().enumerate() {
        if !used[i] {
            table.push(row.clone());
        }
    }
    let mut out: Vec<String> = lines[..body].iter().map(|l| (*l).to_owned()).collect();
    out.extend(table);
    out.extend(lines[end..].iter().map(|l| (*l).to_owned()));
    let mut text = out.join("\n");
    if page.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// The page's "Figures are current as of DATE." sentence, with today's date.
fn current_as_of(page: &str, date: &str) -> String {
    let Ok(re) = regex::Regex::new(r"current as of \d{4}-\d{2}-\d{2}") else {
        return page.to_owned();
    };
    re.replace(page, format!("current as of {date}").as_str())
        .into_owned()
}

/// The run for the bench log: the machine, then every raw figure.
fn log_entry(
    m: &Machine,
    quick: bool,
    agreement: &str,
    r: &Results,
    p: &BTreeMap<(usize, &'static str), Process>,
    failed: &[String],
    took: Duration,
) -> String {
    let mut out = format!(
        "\n## {}: `cargo xtask bench{}`\n\n{} ({} cores), {}, load {} at the start; {:.0} s in all.\n\n",
        m.date,
        if quick { " --quick" } else { "" },
        m.cpu,
        m.cores,
        m.rustc,
        m.load,
        took.as_secs_f64()
    );
    out.push_str(agreement);
    if !failed.is_empty() {
        let _ = writeln!(out, "- failed, not measured: {}", failed.join(", "));
    }
    out.push_str(
        "\n| criterion id | low | median | high | per second (median) |\n|---|---|---|---|---|\n",
    );
    for (id, e) in &r.0 {
        let rate = e
            .per_second()
            .map_or_else(|| "—".to_owned(), |(m, _, _)| thousands(m));
        let _ = writeln!(
            out,
            "| `{id}` | {} | {} | {} | {rate} |",
            duration(e.low),
            duration(e.median),
            duration(e.high)
        );
    }
    out.push_str("\n| whole process | rules | calls | start-up and load | per call |\n|---|---|---|---|---|\n");
    for ((n, engine), w) in p {
        let _ = writeln!(
            out,
            "| {engine} | {} | {} | {} | {} |",
            thousands(*n as f64),
            thousands(w.calls as f64),
            duration(w.start * 1e9),
            duration(w.per_call * 1e9)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_figures_and_ratios_read_as_the_page_writes_them() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(20_790), "2026-12-03");
        assert_eq!(duration(630.4), "630 ns");
        assert_eq!(duration(2_612.0), "2.61 µs");
        assert_eq!(duration(18_400.0), "18.4 µs");
        assert_eq!(duration(1_370_000.0), "1.37 ms");
        assert_eq!(thousands(61_234.0), "61,234");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(ratio(4.23), "4.2×");
        assert_eq!(ratio(20.7), "21×");
        assert_eq!(ratio(8_123.0), "8,100×");
    }

    #[test]
    fn a_rewritten_table_keeps_the_rows_it_does_not_own() {
        let page = "# P\n\n## T\n\nprose\n\n| what | figure |\n|---|---|\n| a, 10 rules | 1 |\n| theirs | 2 |\n| b | 3 |\n\nafter\n";
        let rows = vec![
            ("a, 10 rules".to_owned(), "| a, 10 rules | 9 |".to_owned()),
            ("c".to_owned(), "| c | 7 |".to_owned()),
        ];
        let out = rewrite_table(page, "## T", &rows).unwrap_or_default();
        assert_eq!(
            out,
            "# P\n\n## T\n\nprose\n\n| what | figure |\n|---|---|\n| a, 10 rules | 9 |\n| theirs | 2 |\n| b | 3 |\n| c | 7 |\n\nafter\n"
        );
        assert!(rewrite_table(page, "## Missing", &rows).is_err());
    }
}
