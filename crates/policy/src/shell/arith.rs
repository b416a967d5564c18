//! Arithmetic may read only numbers.
//!
//! Bash evaluates arithmetic in `$((…))`, `$[…]`, `((…))`, `for ((…))`, `let`, the operands of
//! `[[ a -eq b ]]` (and `-ne`, `-lt`, `-le`, `-gt`, `-ge`), `[[ -v name[i] ]]`, array
//! subscripts, substring offsets (`${s:i:n}`), and every assignment to a variable declared
//! `-i`. An expression that names an array element evaluates its subscript, and a subscript
//! holding a command substitution runs it: `x='a[$(rm -rf ~)]'; echo $((x))` runs `rm`. The
//! text can come from anywhere — a literal in the command, a file, the environment, a variable
//! an earlier call set — so Warden cannot know what an operand holds unless it is a number.
//!
//! The rule: an arithmetic operand must be an integer literal or a numeric special parameter
//! (`$#`, `$?`, `$$`, `$!`); anything else (a variable, an expansion, a substitution's output,
//! a string) makes the command unknown, and so never allowed. Declaring `-i` or `-n` (which
//! turn later assignments and expansions into evaluations) is unknown too, as is a variable
//! name with a subscript that is not a number (`read 'a[$x]'`, `printf -v 'a[…]'`).

use tree_sitter::Node;

use super::word::{Word, shorten, text_of};

/// Why reading `what` as arithmetic makes a command unknown.
fn reason(what: &str) -> String {
    format!(
        "arithmetic evaluation reads `{}`, which is not a number: bash evaluates array subscripts in it, and a subscript can run a command (`a[$(…)]`)",
        shorten(what)
    )
}

/// Whether `s` is an integer literal as bash's arithmetic reads one (`-3`, `0x1f`, `017`,
/// `2#101`).
pub(super) fn integer_literal(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if let Some((base, digits)) = s.split_once('#') {
        return !base.is_empty()
            && base.bytes().all(|b| b.is_ascii_digit())
            && !digits.is_empty()
            && digits
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'@' || b == b'_');
    }
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A numeric special parameter as written: `$#`, `$?`, `$$`, `$!` (braced or quoted).
fn numeric_special(written: &str) -> bool {
    let w = written.trim_matches('"');
    matches!(
        w,
        "$#" | "$?" | "$$" | "$!" | "${#}" | "${?}" | "${$}" | "${!}"
    )
}

/// Why the arithmetic expression at `node` (and below it) reads something that is not a
/// number, if it does. Operators and numbers are fine; a variable name, an expansion (but a
/// numeric special parameter), a substitution, a string or an array element is not. No
/// recursion: an explicit stack.
pub(super) fn expression(node: Node<'_>, src: &[u8]) -> Option<String> {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        let text = text_of(src, n.start_byte(), n.end_byte());
        match n.kind() {
            "number" => {}
            "word" if n.named_child_count() == 0 => {
                if !integer_literal(&text) {
                    return Some(reason(&text));
                }
            }
            "simple_expansion" | "expansion" => {
                if !numeric_special(&text) {
                    return Some(reason(&text));
                }
            }
            "variable_name"
            | "command_substitution"
            | "process_substitution"
            | "subscript"
            | "string"
            | "raw_string"
            | "ansi_c_string"
            | "translated_string"
            | "concatenation"
            | "arithmetic_expansion" => {
                let inner = text.trim_matches(['"', '\'']);
                if !integer_literal(inner) {
                    return Some(reason(&text));
                }
            }
            _ => {
                let mut cursor = n.walk();
                stack.extend(n.named_children(&mut cursor));
            }
        }
    }
    None
}

/// Why a subscript node (`name[index]`) evaluates something that is not a number, if it does
/// (`@` and `*` select every element and evaluate nothing).
pub(super) fn subscript(node: Node<'_>, src: &[u8]) -> Option<String> {
    let mut cursor = node.walk();
    let index = node
        .children_by_field_name("index", &mut cursor)
        .next()
        .or_else(|| {
            let mut c = node.walk();
            node.named_children(&mut c)
                .find(|k| k.kind() != "variable_name")
        })?;
    let text = text_of(src, index.start_byte(), index.end_byte());
    if matches!(text.as_str(), "@" | "*") {
        return None;
    }
    expression(index, src)
}

/// Why a variable name given to a builtin as text (`read 'a[$x]'`) evaluates a subscript that
/// is not a number, if it does.
fn name_with_subscript(w: &Word) -> Option<String> {
    let v = w.value.as_str();
    let (open, close) = (v.find('[')?, v.rfind(']')?);
    let index = v.get(open + 1..close).unwrap_or("");
    if w.dynamic.is_none() && (index == "@" || index == "*" || integer_literal(index)) {
        return None;
    }
    Some(reason(&w.written))
}

/// Why a command evaluates arithmetic on something that is not a number, if it does: `let`;
/// `declare`, `typeset`, `local`, `export`, `readonly` with `-i` or `-n`, or naming a
/// variable with a subscript; `read`, `mapfile`, `readarray`, `printf -v`, `getopts`,
/// `unset` naming one; `test -v` / `[ -v` with one.
pub(super) fn command(name: &str, args: &[Word]) -> Option<String> {
    match name {
        "let" => args
            .iter()
            .find(|w| !arithmetic_text_is_numeric(w))
            .map(|w| reason(&w.written)),
        "declare" | "typeset" | "local" | "export" | "readonly" => {
            // `export -n` and `readonly` take no `-i` or `-n` attribute.
            let attributes = matches!(name, "declare" | "typeset" | "local");
            for w in args {
                if attributes
                    && w.dynamic.is_none()
                    && w.value.starts_with(['-', '+'])
                    && w.value.len() > 1
                    && w.value[1..].contains(['i', 'n'])
                    && !w.value.contains('=')
                {
                    return Some(format!(
                        "`{name} {}` makes later assignments or expansions of the variable evaluate their values (a value can hold `a[$(…)]`, which bash would run)",
                        w.written
                    ));
                }
                let target = match w.value.split_once('=') {
                    Some((n, _)) => Word {
                        value: n.to_owned(),
                        written: w.written.clone(),
                        dynamic: w.dynamic.clone(),
                        ..Word::default()
                    },
                    None => w.clone(),
                };
                if let Some(r) = name_with_subscript(&target) {
                    return Some(r);
                }
            }
            None
        }
        "read" | "mapfile" | "readarray" | "getopts" | "unset" => args
            .iter()
            .filter(|w| !w.value.starts_with('-'))
            .find_map(name_with_subscript),
        "printf" => {
            // `-v NAME` or the joined `-vNAME`.
            let v = args.iter().position(|w| w.value.starts_with("-v"))?;
            match args[v].value.strip_prefix("-v").filter(|n| !n.is_empty()) {
                Some(joined) => name_with_subscript(&Word {
                    value: joined.to_owned(),
                    ..args[v].clone()
                }),
                None => args.get(v + 1).and_then(name_with_subscript),
            }
        }
        "test" | "[" => args
            .windows(2)
            .find(|p| p[0].value == "-v")
            .and_then(|p| name_with_subscript(&p[1])),
        _ => None,
    }
}

/// Whether a `let` argument is arithmetic on numbers only: digits, operators, spaces.
fn arithmetic_text_is_numeric(w: &Word) -> bool {
    w.dynamic.is_none()
        && w.value.bytes().all(|b| {
            b.is_ascii_digit() || b" +-*/%<>=!&|^~(),?:".contains(&b) || b.is_ascii_whitespace()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_literals_are_what_bash_arithmetic_reads_as_numbers() {
        for s in ["0", "42", "-3", "+7", "0x1F", "017", "2#101", "64#a_@"] {
            assert!(integer_literal(s), "{s}");
        }
        for s in ["", "x", "1x", "0x", "a[1]", "$(x)", "1+1", "#1", "2#"] {
            assert!(!integer_literal(s), "{s}");
        }
    }

    #[test]
    fn builtins_that_evaluate_names_or_arithmetic() {
        let w = |s: &str| Word::literal(s);
        assert!(command("let", &[w("x=1+2")]).is_some());
        assert!(command("let", &[w("1+2")]).is_none());
        assert!(command("declare", &[w("-i"), w("y=1")]).is_some());
        assert!(command("local", &[w("-rn"), w("r")]).is_some());
        assert!(command("declare", &[w("-a"), w("y")]).is_none());
        assert!(command("declare", &[w("a[$(rm x)]=1")]).is_some());
        assert!(command("declare", &[w("a[3]=1")]).is_none());
        assert!(command("read", &[w("-r"), w("a[$(rm x)]")]).is_some());
        assert!(command("read", &[w("-r"), w("line")]).is_none());
        assert!(command("printf", &[w("-v"), w("a[i]"), w("%s"), w("1")]).is_some());
        assert!(command("printf", &[w("%d"), w("a[$(rm x)]")]).is_none());
        assert!(command("printf", &[w("-va[$(rm x)]"), w("%s"), w("1")]).is_some());
        assert!(command("test", &[w("-v"), w("a[$(rm x)]")]).is_some());
        assert!(command("unset", &[w("a[@]")]).is_none());
    }
}
