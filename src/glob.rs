//! Glob patterns as Redis matches them (its `stringmatchlen`): `*`, `?`, `[abc]`,
//! `[^abc]`, `[a-z]` (ends in either order) and `\` escapes, optionally ignoring ASCII
//! case. One matcher for KEYS, SCAN/HSCAN/SSCAN/ZSCAN MATCH, CONFIG GET and FUNCTION LIST.
//!
//! The quirks are Redis's: a range's upper end may be `]` (`[a-]` matches `a` through `]`),
//! an escaped character inside brackets compares exactly even when ignoring case, and an
//! unclosed `[` ends the pattern. Like Redis, a star that let the rest of the pattern run
//! off the end of the string stops the stars before it from trying longer matches (so
//! `*a*a*a*b` cannot take exponential time), and patterns nested over 1000 stars deep
//! match nothing.

/// Whether `s` matches the glob `pattern`.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    matches(pattern, s, nocase, &mut skip_longer, 0)
}

/// Redis's `stringmatchlen_impl`.
fn matches(mut p: &[u8], mut s: &[u8], nocase: bool, skip_longer: &mut bool, depth: u32) -> bool {
    if depth > 1000 {
        return false;
    }
    let same = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    while let (Some(&pc), Some(&sc)) = (p.first(), s.first()) {
        // Each arm leaves `p` after the pattern element it matched.
        match pc {
            b'*' => {
                while p.get(1) == Some(&b'*') {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if matches(&p[1..], s, nocase, skip_longer, depth + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => p = &p[1..],
            b'[' => {
                let (matched, rest) = bracket(&p[1..], sc, nocase);
                if !matched {
                    return false;
                }
                p = rest;
            }
            b'\\' if p.len() >= 2 => {
                if !same(p[1], sc) {
                    return false;
                }
                p = &p[2..];
            }
            _ => {
                if !same(pc, sc) {
                    return false;
                }
                p = &p[1..];
            }
        }
        s = &s[1..];
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
        }
    }
    p.is_empty() && s.is_empty()
}

/// A bracket class (`p` starts after the `[`) against the byte `c`: whether it matches,
/// and the pattern after the class's closing `]` (nothing when the class is unclosed).
fn bracket(mut p: &[u8], c: u8, nocase: bool) -> (bool, &[u8]) {
    let not = p.first() == Some(&b'^');
    if not {
        p = &p[1..];
    }
    let mut matched = false;
    loop {
        match p {
            // Unclosed: the class takes the rest of the pattern.
            [] => break,
            [b'\\', e, ..] => {
                matched |= *e == c;
                p = &p[2..];
            }
            [b']', rest @ ..] => {
                p = rest;
                break;
            }
            [lo, b'-', hi, ..] => {
                let (mut lo, mut hi, mut c) = (*lo.min(hi), *lo.max(hi), c);
                if nocase {
                    lo = lo.to_ascii_lowercase();
                    hi = hi.to_ascii_lowercase();
                    c = c.to_ascii_lowercase();
                }
                matched |= (lo..=hi).contains(&c);
                p = &p[3..];
            }
            [e, rest @ ..] => {
                matched |= if nocase {
                    e.eq_ignore_ascii_case(&c)
                } else {
                    *e == c
                };
                p = rest;
            }
        }
    }
    (matched != not, p)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn patterns_match_like_redis() {
        let m = |p: &str, s: &str| glob_match(p.as_bytes(), s.as_bytes(), false);
        assert!(m("*", "anything"));
        // stringmatchlen("*", "") is 0: KEYS and SCAN treat a lone `*` as no pattern.
        assert!(!m("*", ""));
        assert!(m("a*", "a"));
        assert!(m("h?llo", "hello"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(m("rate.limit.*", "rate.limit.1.2"));
        assert!(!m("a*b", "acd"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("a**", "a"));
        assert!(!m("?", ""));
        assert!(!m("", "a"));
        assert!(m("", ""));
        // Observed on redis-server 7.0.15 with keys a b - ] x] c: KEYS [a-] and KEYS [a-]]
        // both answer a and ].
        for pattern in ["[a-]", "[a-]]"] {
            let hits: Vec<&str> = ["a", "b", "-", "]", "x]", "c"]
                .into_iter()
                .filter(|k| m(pattern, k))
                .collect();
            assert_eq!(hits, ["a", "]"], "{pattern}");
        }
        // An unclosed class ends the pattern.
        assert!(m("a[bc", "ab"));
        assert!(!m("a[bc", "abc"));
        assert!(m("[\\]]", "]"));
    }

    #[test]
    fn case_folding_spares_escapes_in_classes() {
        let m = |p: &str, s: &str| glob_match(p.as_bytes(), s.as_bytes(), true);
        assert!(m("MAXMEMORY*", "maxmemory-policy"));
        assert!(m("[A-C]x", "bX"));
        assert!(m("[B]", "b"));
        assert!(!m("[\\B]", "b"));
        assert!(m("\\B", "b"));
    }

    #[test]
    fn many_stars_stay_fast() {
        let pattern = "*a".repeat(40) + "b";
        let text = "a".repeat(200);
        assert!(!glob_match(pattern.as_bytes(), text.as_bytes(), false));
        let deep = "*x".repeat(2000);
        assert!(!glob_match(
            deep.as_bytes(),
            "x".repeat(3000).as_bytes(),
            false
        ));
    }
}
