//! Fuzz target: the rule grammar never panics, and every rule list it accepts prints back to
//! text that parses to the same rules.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warden_policy::Rule;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(rules) = Rule::parse_list(text) else {
        return;
    };
    let printed: Vec<String> = rules.iter().map(ToString::to_string).collect();
    let again = match Rule::parse_list(&printed.join(" ")) {
        Ok(r) => r,
        Err(e) => panic!("{printed:?} does not parse back: {e}"),
    };
    assert_eq!(rules, again, "{text:?}");
});
