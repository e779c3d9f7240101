//! Checks applied to a candidate secret after its regex matched: Shannon
//! entropy, character-class variety and the built-in placeholder test.

/// Shannon entropy of `s` in bits per byte (0 for an empty slice).
pub fn shannon_entropy(s: &[u8]) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in s {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// How many of the classes lower, upper, digit, other occur in `s`.
pub fn char_classes(s: &[u8]) -> u8 {
    let (mut lo, mut up, mut di, mut ot) = (false, false, false, false);
    for &b in s {
        match b {
            b'a'..=b'z' => lo = true,
            b'A'..=b'Z' => up = true,
            b'0'..=b'9' => di = true,
            _ => ot = true,
        }
    }
    u8::from(lo) + u8::from(up) + u8::from(di) + u8::from(ot)
}

/// Words that mark a value as a stand-in rather than a credential. Matched
/// ASCII case-insensitively anywhere in the secret.
pub const PLACEHOLDER_WORDS: &[&str] = &[
    "example",
    "xxxx",
    "placeholder",
    "changeme",
    "change_me",
    "change-me",
    "your_",
    "your-",
    "yourkey",
    "yourtoken",
    "yoursecret",
    "yourapi",
    "yourpass",
    "dummy",
    "redacted",
    "replace",
    "insert",
    "sample",
    "fake",
    "notreal",
    "not_real",
    "not-real",
    "****",
    "...",
];

/// Length of the longest run of identical bytes, and of the longest run of
/// bytes each one more (or each one less) than the previous (`abcdef`,
/// `987654`).
fn longest_runs(s: &[u8]) -> (usize, usize) {
    let (mut same, mut best_same) = (1usize, 1usize);
    let (mut up, mut down, mut best_seq) = (1usize, 1usize, 1usize);
    for w in s.windows(2) {
        let (a, b) = (w[0], w[1]);
        same = if a == b { same + 1 } else { 1 };
        let alnum = a.is_ascii_alphanumeric() && b.is_ascii_alphanumeric();
        up = if alnum && b == a.wrapping_add(1) {
            up + 1
        } else {
            1
        };
        down = if alnum && a == b.wrapping_add(1) {
            down + 1
        } else {
            1
        };
        best_same = best_same.max(same);
        best_seq = best_seq.max(up).max(down);
    }
    (best_same, best_seq)
}

/// Minimum run of identical or sequential characters that marks a secret as
/// a placeholder (`aaaaaa`, `123456`, `abcdef`).
pub const PLACEHOLDER_RUN: usize = 6;

/// True when `s` looks like a stand-in: a placeholder word, a template
/// expression (`${X}`, `{{x}}`, `<X>`, `%X%`), or a long run of repeated or
/// sequential characters.
pub fn is_placeholder(s: &[u8]) -> bool {
    if s.is_empty() {
        return true;
    }
    let lower: Vec<u8> = s.iter().map(u8::to_ascii_lowercase).collect();
    if PLACEHOLDER_WORDS
        .iter()
        .any(|w| memchr::memmem::find(&lower, w.as_bytes()).is_some())
    {
        return true;
    }
    if matches!(s[0], b'$' | b'<' | b'%' | b'{')
        || memchr::memmem::find(s, b"${").is_some()
        || memchr::memmem::find(s, b"{{").is_some()
        || memchr::memchr2(b'<', b'>', s).is_some()
    {
        return true;
    }
    let (same, seq) = longest_runs(s);
    same >= PLACEHOLDER_RUN || seq >= PLACEHOLDER_RUN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_of_uniform_and_constant_strings() {
        assert_eq!(shannon_entropy(b"aaaa"), 0.0);
        assert!((shannon_entropy(b"abcd") - 2.0).abs() < 1e-9);
        assert!((shannon_entropy(b"0123456789abcdef") - 4.0).abs() < 1e-9);
    }

    #[test]
    fn placeholders_are_recognised_and_random_strings_are_not() {
        for p in [
            "AKIAIOSFODNN7EXAMPLE",
            "xxxxxxxxxxxxxxxxxxxx",
            "your-token-here",
            "<YOUR_API_KEY>",
            "${TOKEN}",
            "changeme",
            "{{ vault_token }}",
            "aaaaaaaa1",
            "abc123456789",
            "zyxwvu",
        ] {
            assert!(is_placeholder(p.as_bytes()), "{p}");
        }
        for s in ["Zq8rT1vW9kL2mN4pX7cB", "hunter2", "s3cr3tP4ss"] {
            assert!(!is_placeholder(s.as_bytes()), "{s}");
        }
    }
}
