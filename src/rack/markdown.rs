//! Text from the nodes and the spec (host names, sysfs strings, doctor's
//! findings, spec and test names, command lines) in summary.md: shown as it
//! was, never read as Markdown or HTML, and never breaking a table row.

/// Characters that start or end Markdown (and GFM) inline markup, HTML, an
/// entity, math or a table cell: each is backslash-escaped (CommonMark lets any
/// ASCII punctuation be). `!` needs none (an image needs the `[` after it),
/// nor `>` (HTML needs the `<`), nor `#` (a heading or a quote starts a line;
/// this text never does).
const MARKUP: &[char] = &['\\', '`', '*', '[', ']', '<', '|', '~', '&', '$'];

/// Inline text: markup escaped, characters that are not text replaced (see
/// `plain`). `_` inside a word (mlx5_0, all_reduce) cannot emphasise and stays
/// as it is, for the file's readers; elsewhere it is escaped.
pub fn text(s: &str) -> String {
    let chars: Vec<char> = plain(s).chars().collect();
    let in_word = |i: usize| {
        let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric());
        i > 0 && word(chars.get(i - 1)) && word(chars.get(i + 1))
    };
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        if MARKUP.contains(&c) || (c == '_' && !in_word(i)) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A code span: between as many backticks as it needs (one more than its
/// longest run of them, as CommonMark reads it), `|` escaped for a table cell
/// (GFM takes `\|` out of a cell before the span is read).
pub fn code(s: &str) -> String {
    let clean = plain(s).replace('|', "\\|");
    let longest = clean.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    // A span that starts or ends with a backtick needs a space inside the fence.
    let pad = if clean.starts_with('`') || clean.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{clean}{pad}{fence}")
}

/// Line breaks and tabs as spaces (a table row is one line); other control
/// characters and the invisible ones that reorder text (bidi overrides) as U+FFFD.
fn plain(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' => ' ',
            c if c.is_control() || is_bidi(c) => '\u{FFFD}',
            c => c,
        })
        .collect()
}

fn is_bidi(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_stay_text() {
        assert_eq!(text("gpu-01"), "gpu-01");
        assert_eq!(
            text("mlx5_0 all_reduce (port-state)"),
            "mlx5_0 all_reduce (port-state)"
        );
        assert_eq!(text("a__b _c d_"), "a\\_\\_b \\_c d\\_");
        assert_eq!(text("a|b"), "a\\|b");
        assert_eq!(text("**bold** _it_"), "\\*\\*bold\\*\\* \\_it\\_");
        assert_eq!(
            text("<script>alert(1)</script>"),
            "\\<script>alert(1)\\</script>"
        );
        assert_eq!(text("`x`"), "\\`x\\`");
        assert_eq!(text("[a](http://x)"), "\\[a\\](http://x)");
        assert_eq!(text("![i](x.png)"), "!\\[i\\](x.png)");
        assert_eq!(text("two\nlines\r\tend"), "two lines  end");
        assert_eq!(
            text("bell\u{7}esc\u{1b}[31m"),
            "bell\u{FFFD}esc\u{FFFD}\\[31m"
        );
        assert_eq!(text("abc\u{202E}fed"), "abc\u{FFFD}fed");
        assert_eq!(text("\\"), "\\\\");
    }

    #[test]
    fn code_spans_hold_any_text() {
        assert_eq!(code("mpirun -np 2"), "`mpirun -np 2`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("``x"), "``` ``x ```");
        assert_eq!(code("x | y\nz"), "`x \\| y z`");
    }
}
