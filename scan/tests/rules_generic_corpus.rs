//! Both sides of the generic keyword-plus-randomness rule, counted: true
//! secrets in many contexts must be reported, and the false-positive shapes
//! seen on clean third-party trees (identifiers, type annotations,
//! expressions, placeholders, documentation values) must not be. The counts
//! are recorded in docs/parts/scan-rules.md.
#![cfg(not(loom))]

use scan::rules::{RuleSet, Scratch};

/// Random-looking secrets (fixed, so the test is reproducible).
const SECRETS: &[&str] = &[
    "Zq8rT1vW9kL2mN4pX7cB",
    "h7Gk2Lm9Qx4Rt8Vz1Nb6",
    "Tr4x9Qm2Vk7Lp3Zw8Hn5Jd",
    "a9F3kQ7mZ2xR8vT4wL6pB1cN",
    "9sK2dF7hJ4lQ8wE3rT6yU1iO0pZ",
];

/// Contexts a secret is assigned in; `{}` is the secret.
const CONTEXTS: &[&str] = &[
    "db_password = \"{}\"",
    "DB_PASSWORD={}",
    "export API_TOKEN='{}'",
    "  client_secret: {}",
    "\"apiKey\": \"{}\",",
    "password := \"{}\"",
    "$password = '{}';",
    "config.secret_key = \"{}\"",
    "https://api.internal.net/v1/items?access_key={}&page=2",
    "Set-Cookie: session_token={}; Path=/; HttpOnly",
    "<password>{}</password>",
    "auth_key => '{}',",
    "SECRET: \"{}\"",
    "token=\"{}\" # prod",
];

/// Shapes that are not credentials.
const NOT_SECRETS: &[&str] = &[
    // identifiers and type annotations
    "\"V1Secret\": \".models.v1_secret\"",
    "MsV1_0ChangePassword: MSV1_0_PROTOCOL_MESSAGE_TYPE",
    "apiKey: SensitiveString2048;",
    "Token: TOKEN_KIND_IDENTIFIER_V2",
    "password: Option<SecretString2048>",
    "access_key: AccessKeyId128,",
    "secret: SecretKeyParameterSpec,",
    "token_type: TokenTypeHint2,",
    "PASSWORD_HASHERS = PasswordHasherConfig3",
    "auth_key = HMAC_SHA256_KEY_LEN",
    // expressions
    "out_len = params.shared_secret_len*2;",
    "token = self.tokenizer.next_token",
    "secret_len = key.secret_size/8",
    "password = request.form.password_field",
    // placeholders
    "password = \"changeme\"",
    "api_key = \"<YOUR_API_KEY>\"",
    "secret = \"${APP_SECRET}\"",
    "token: {{ vault_token }}",
    "password = \"xxxxxxxxxxxxxxxx\"",
    "SECRET_KEY = \"your-secret-key-here\"",
    "token = \"REDACTED_TOKEN_VALUE1\"",
    // documentation values
    "api_key = \"sk_test_4eC39HqLyjWDarjtT1zdp7dc\"",
    "password = \"P@ssw0rd123!\"",
    "password: \"correcthorsebatterystaple1!\"",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    // names of tokens that are not credentials
    "\"NextToken\": \"eyJOZXh0VG9rZW4iOiBudWxsfQ==\"",
    "csrf_token = \"Kx9Lm2Qw8Er4Ty6Ui1Op\"",
];

fn findings(rs: &RuleSet, text: &str) -> Vec<(String, String)> {
    let mut s = Scratch::new();
    s.set_path(Some("src/settings.conf"));
    let mut out = Vec::new();
    rs.scan(text.as_bytes(), 0..text.len(), &mut s, &mut out);
    out.iter()
        .map(|m| {
            (
                rs.rule(m.rule).id.clone(),
                text[m.secret_start..m.secret_end].to_owned(),
            )
        })
        .collect()
}

#[test]
fn true_secrets_in_every_context_are_reported_with_the_exact_secret() {
    let rs = RuleSet::builtin();
    let mut missed = Vec::new();
    let mut total = 0;
    for ctx in CONTEXTS {
        for secret in SECRETS {
            total += 1;
            let line = format!("{}\n", ctx.replace("{}", secret));
            let f = findings(&rs, &line);
            if f.len() != 1 || f[0].1 != *secret {
                missed.push(format!("{line:?} -> {f:?}"));
            }
        }
    }
    assert_eq!(total, CONTEXTS.len() * SECRETS.len());
    assert!(
        missed.is_empty(),
        "{} of {total}:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

#[test]
fn false_positive_shapes_are_not_reported() {
    let rs = RuleSet::builtin();
    let reported: Vec<String> = NOT_SECRETS
        .iter()
        .filter_map(|line| {
            let f = findings(&rs, &format!("{line}\n"));
            (!f.is_empty()).then(|| format!("{line:?} -> {f:?}"))
        })
        .collect();
    assert!(NOT_SECRETS.len() >= 25);
    assert!(reported.is_empty(), "{}", reported.join("\n"));
}

#[test]
fn the_generic_rule_has_low_precision_and_specific_rules_do_not() {
    use scan::rules::Precision;
    let rs = RuleSet::builtin();
    let generic = rs.find("generic-secret-assignment").unwrap();
    assert_eq!(rs.rule(generic).precision, Precision::Low);
    for id in rs.ids().filter(|&i| i != generic) {
        assert_ne!(rs.rule(id).precision, Precision::Low, "{}", rs.rule(id).id);
    }
    assert_eq!(
        rs.rule(rs.find("github-pat").unwrap()).precision,
        Precision::High
    );
}
