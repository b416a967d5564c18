//! The re-exec helper as a standalone binary: `warden-sandbox-helper __warden-sandbox-exec <spec>`.
#![deny(unsafe_code)]

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = warden_sandbox::helper::dispatch(&args).unwrap_or_else(|| {
        eprintln!("usage: warden-sandbox-helper __warden-sandbox-exec <spec json>");
        2
    });
    std::process::exit(code);
}
