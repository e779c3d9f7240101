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
    // The clean tree's last six (docs/parts/scan-rules.md, "Clean tree:
    // the last six"): AWS CLI documentation outputs whose neighbouring
    // fields carry AWS's documentation markers, AWS's documented BGP key,
    // and joserfc's README JWT (claims `{"k": "value"}`).
    AWS_SERVICE_PASSWORD,
    AWS_SHARED_SECRET,
    "    \"customerRouterConfig\": \"<?xml version=\\\"1.0\\\"?>\\n  <bgp_asn>65000</bgp_asn>\\n  <bgp_auth_key>0x123pK5_VBqv.UQ3kJ4123_</bgp_auth_key>\\n\",",
    "    'eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJrIjoidmFsdWUifQ._M8ViO_GK6TnZ9G9eqdlS7IpNWzhoGwaYYDQ3hEwwmA'",
];

/// awscli's `iam create-service-specific-credential` example output.
const AWS_SERVICE_PASSWORD: &str = r#"    {
        "ServiceSpecificCredential": {
            "CreateDate": "2019-04-18T20:45:36+00:00",
            "ServiceName": "codecommit.amazonaws.com",
            "ServiceUserName": "sofia-at-123456789012",
            "ServicePassword": "k1zPZM6uVxMQ3oxqgoYlNuJPyRTZ1vREs76zTQE3eJk=",
            "ServiceSpecificCredentialId": "ACCAEXAMPLE123EXAMPLE",
            "UserName": "sofia",
            "Status": "Active"
        }
    }"#;

/// awscli's `kms derive-shared-secret` example output.
const AWS_SHARED_SECRET: &str = r#"    {
        "KeyId": "1234abcd-12ab-34cd-56ef-1234567890ab",
        "SharedSecret": "MEYCIQCKZLWyTk5runarx6XiAkU9gv3lbwPO/pHa+DXFehzdDwIhANwpsIV2g/9SPWLLsF6p/hiSskuIXMTRwqrMdVKWTMHG",
        "KeyAgreementAlgorithm": "ECDH",
        "KeyOrigin": "AWS_KMS"
    }"#;

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

/// The AWS documentation markers are what drops the two AWS outputs above:
/// with each marker replaced by a value of the same shape that is not
/// AWS's (another account id, a random credential id, a random key id), the
/// same blocks are reported, with the exact secret.
#[test]
fn aws_documentation_markers_are_what_drops_the_aws_outputs() {
    let rs = RuleSet::builtin();
    let cases = [
        (
            AWS_SERVICE_PASSWORD
                .replace("123456789012", "318294675023")
                .replace("ACCAEXAMPLE123EXAMPLE", "ACCA4QZ7RTX2LMN9KPW3"),
            "k1zPZM6uVxMQ3oxqgoYlNuJPyRTZ1vREs76zTQE3eJk=",
        ),
        (
            AWS_SHARED_SECRET.replace(
                "1234abcd-12ab-34cd-56ef-1234567890ab",
                "7f3e9a1c-4b2d-48e6-9c0a-5d8b1e2f6a47",
            ),
            "MEYCIQCKZLWyTk5runarx6XiAkU9gv3lbwPO/pHa+DXFehzdDwIhANwpsIV2g/9SPWLLsF6p/hiSskuIXMTRwqrMdVKWTMHG",
        ),
    ];
    for (text, secret) in &cases {
        let f = findings(&rs, &format!("{text}\n"));
        assert_eq!(
            f,
            vec![("generic-secret-assignment".to_owned(), (*secret).to_owned())],
            "{text}"
        );
    }
    // A marker more than LINE_CLIP bytes away does not count.
    let far = format!(
        "\"ServiceUserName\": \"sofia-at-123456789012\",\n{}\n\"ServicePassword\": \"k1zPZM6uVxMQ3oxqgoYlNuJPyRTZ1vREs76zTQE3eJk=\"\n",
        "#".repeat(300)
    );
    assert_eq!(findings(&rs, &far).len(), 1, "{far}");
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
