//! Generator templates: a tiny language that synthesises fresh random
//! secrets in a rule's format, used by the tests and the planted-secret
//! corpus (`scan-plant`, in `tools/scan-plant`).
//!
//! A template is literal text with placeholders:
//!
//! | placeholder | expands to |
//! | --- | --- |
//! | `{CLASS:N}` | `N` random characters of `CLASS` |
//! | `{CLASS:N-M}` | between `N` and `M` random characters of `CLASS` |
//! | `{pem:N}` | `N` base64 characters broken into 64-character lines (newlines) |
//! | `{pemjson:N}` | the same, lines joined by the two characters `\n` (a PEM inside a JSON string) |
//! | `{uuid}` | a random lowercase version-4 UUID |
//! | `{secret}` | (examples only) the secret rendered from the rule's template |
//!
//! `CLASS` is one of the names in [`CLASSES`]. A brace group that is not one
//! of these forms is literal text, so `${TOKEN}` or `{"a": 1}` need no
//! escaping.

/// Character classes a template may draw from.
pub const CLASSES: &[(&str, &str)] = &[
    (
        "alnum",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    ),
    (
        "alpha",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    ),
    ("upper", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    ("lower", "abcdefghijklmnopqrstuvwxyz"),
    ("digit", "0123456789"),
    ("hex", "0123456789abcdef"),
    ("HEX", "0123456789ABCDEF"),
    ("upalnum", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
    ("lowalnum", "abcdefghijklmnopqrstuvwxyz0123456789"),
    (
        "b64",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    ),
    (
        "b64url",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
    ),
    ("b32", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
    ("b32lower", "abcdefghijklmnopqrstuvwxyz234567"),
    ("bech32", "qpzry9x8gf2tvdw0s3jn54khce6mua7l"),
    ("BECH32", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"),
    // crypt(3) hash strings (bcrypt, SHA-crypt, MD5-crypt).
    (
        "crypt",
        "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    ),
    // Django's startproject SECRET_KEY alphabet.
    (
        "django",
        "abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)",
    ),
    // Characters a password may hold inside a URL's userinfo.
    (
        "urlpass",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.~!*",
    ),
];

/// A small, fast, seedable generator (SplitMix64). Reproducible across
/// platforms, which the corpus's byte-identical output depends on.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose whole output is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6a09_e667_f3bc_c909)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below(0)");
        // Multiply-shift reduction; the bias is < n / 2^64, irrelevant here.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform value in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// A uniformly chosen element of `items` (non-empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Why a template could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn class(name: &str) -> Option<&'static [u8]> {
    CLASSES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| c.as_bytes())
}

/// One parsed `{...}` group.
enum Piece<'a> {
    Literal(&'a str),
    Class {
        chars: &'static [u8],
        lo: usize,
        hi: usize,
    },
    Pem {
        n: usize,
        sep: &'static str,
    },
    Uuid,
    Secret,
}

fn parse_count(s: &str) -> Option<(usize, usize)> {
    match s.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (a.parse().ok()?, b.parse().ok()?);
            (a <= b).then_some((a, b))
        }
        None => s.parse().ok().map(|n| (n, n)),
    }
}

fn parse_group(inner: &str) -> Option<Piece<'static>> {
    match inner {
        "uuid" => return Some(Piece::Uuid),
        "secret" => return Some(Piece::Secret),
        _ => {}
    }
    let (name, count) = inner.split_once(':')?;
    let (lo, hi) = parse_count(count)?;
    match name {
        "pem" => return (lo == hi).then_some(Piece::Pem { n: lo, sep: "\n" }),
        "pemjson" => return (lo == hi).then_some(Piece::Pem { n: lo, sep: "\\n" }),
        _ => {}
    }
    Some(Piece::Class {
        chars: class(name)?,
        lo,
        hi,
    })
}

fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        match parse_group(&rest[open + 1..close]) {
            Some(p) => {
                if open > 0 {
                    out.push(Piece::Literal(&rest[..open]));
                }
                out.push(p);
                rest = &rest[close + 1..];
            }
            None => {
                // Not a placeholder: keep the brace as text and move on.
                out.push(Piece::Literal(&rest[..open + 1]));
                rest = &rest[open + 1..];
            }
        }
    }
    if !rest.is_empty() {
        out.push(Piece::Literal(rest));
    }
    out
}

/// Checks that `template` only uses known classes. `{secret}` is allowed
/// only when `allow_secret`.
pub fn validate(template: &str, allow_secret: bool) -> Result<(), TemplateError> {
    for p in pieces(template) {
        if matches!(p, Piece::Secret) && !allow_secret {
            return Err(TemplateError(format!(
                "template {template:?} uses {{secret}}"
            )));
        }
    }
    Ok(())
}

/// Expands `template`, drawing randomness from `rng`; `{secret}` becomes
/// `secret` (or stays empty when `None`).
pub fn render(template: &str, rng: &mut Rng, secret: Option<&str>) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    for p in pieces(template) {
        match p {
            Piece::Literal(s) => out.push_str(s),
            Piece::Class { chars, lo, hi } => {
                let n = rng.range(lo, hi);
                for _ in 0..n {
                    out.push(*rng.pick(chars) as char);
                }
            }
            Piece::Pem { n, sep } => {
                let b64 = class("b64").expect("b64 class");
                for i in 0..n {
                    if i > 0 && i % 64 == 0 {
                        out.push_str(sep);
                    }
                    out.push(*rng.pick(b64) as char);
                }
            }
            Piece::Uuid => {
                let hex = b"0123456789abcdef";
                for i in 0..32 {
                    if matches!(i, 8 | 12 | 16 | 20) {
                        out.push('-');
                    }
                    let c = match i {
                        12 => '4',
                        16 => *rng.pick(b"89ab") as char,
                        _ => *rng.pick(hex) as char,
                    };
                    out.push(c);
                }
            }
            Piece::Secret => out.push_str(secret.unwrap_or("")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_expands_classes_and_keeps_unknown_braces() {
        let mut rng = Rng::new(7);
        let s = render("ghp_{alnum:36}", &mut rng, None);
        assert_eq!(s.len(), 40);
        assert!(s[4..].bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(render("${TOKEN} {x:y}", &mut rng, None), "${TOKEN} {x:y}");
        let u = render("{uuid}", &mut rng, None);
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        let p = render("{pem:130}", &mut rng, None);
        assert_eq!(p.lines().map(str::len).collect::<Vec<_>>(), vec![64, 64, 2]);
    }

    #[test]
    fn same_seed_renders_the_same_text() {
        let a = render("{b64:40}-{hex:8-12}", &mut Rng::new(99), None);
        let b = render("{b64:40}-{hex:8-12}", &mut Rng::new(99), None);
        let c = render("{b64:40}-{hex:8-12}", &mut Rng::new(100), None);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
