//! The default rules. Every regex here was written for magpie from the
//! public description of each credential format (prefix, alphabet, length).
//!
//! Two shapes cover almost every rule:
//! - [`tok`]: a self-identifying token whose match starts with a literal
//!   prefix (`ghp_`, `xoxb-`, ...); the prefix is the keyword, so the rule is
//!   *anchored* and only a window after the keyword is searched.
//! - [`ctx`]: a format with no distinctive prefix, recognised by a vendor
//!   name in the variable or key it is assigned to (`HEROKU_API_KEY = ...`).

use super::spec::{AllowlistSpec, Precision, RegexTarget, RuleSpec};

mod formats;
mod services;

/// Key name, then an assignment: `NAME_suffix"? = "`, `: `, `:=`, `=>`.
const ASSIGN: &str = r#"[\w.-]{0,25}?["']?\s{0,4}(?::=|=>|=|:)\s{0,4}["'`]?"#;
/// Ends a value drawn from `[A-Za-z0-9_-]`.
const END_URL: &str = r"(?:[^A-Za-z0-9_-]|$)";
/// Ends a value drawn from base64 (`[A-Za-z0-9+/=]`).
const END_B64: &str = r"(?:[^A-Za-z0-9+/=]|$)";

struct B {
    spec: RuleSpec,
}

impl B {
    fn ent(mut self, e: f64) -> B {
        self.spec.entropy = Some(e);
        self
    }
    fn prio(mut self, p: i32) -> B {
        self.spec.priority = p;
        self
    }
    fn max(mut self, m: usize) -> B {
        self.spec.max_len = Some(m);
        self
    }
    fn classes(mut self, c: u8) -> B {
        self.spec.min_char_classes = c;
        self
    }
    fn no_placeholder_check(mut self) -> B {
        self.spec.placeholder_check = false;
        self
    }
    fn precision(mut self, p: Precision) -> B {
        self.spec.precision = p;
        self
    }
    /// The secret is the first capture group that matched (for a regex
    /// whose alternatives capture it in different groups).
    fn any_group(mut self) -> B {
        self.spec.secret_group = None;
        self
    }
    fn ci(mut self) -> B {
        self.spec.keywords_case_sensitive = false;
        self
    }
    fn ex(mut self, e: &[&str]) -> B {
        self.spec.examples = e.iter().map(|s| s.to_string()).collect();
        self
    }
    fn neg(mut self, n: &[&str]) -> B {
        self.spec
            .counter_examples
            .extend(n.iter().map(|s| s.to_string()));
        self
    }
    /// One allowlist of `regexes` matched against `target`.
    fn allow(mut self, description: &str, target: RegexTarget, regexes: &[&str]) -> B {
        self.spec.allowlists.push(AllowlistSpec {
            description: description.into(),
            regex_target: target,
            regexes: regexes.iter().map(|s| s.to_string()).collect(),
            ..AllowlistSpec::default()
        });
        self
    }
    fn allow_secret(self, regexes: &[&str]) -> B {
        self.allow("known non-secret values", RegexTarget::Secret, regexes)
    }
    fn allow_line(self, regexes: &[&str]) -> B {
        self.allow("not credentials", RegexTarget::Line, regexes)
    }
    fn allow_around(self, regexes: &[&str]) -> B {
        self.allow("documentation context", RegexTarget::Around, regexes)
    }
    fn allow_match(self, regexes: &[&str]) -> B {
        self.allow("not credentials", RegexTarget::Match, regexes)
    }
    fn stopwords(mut self, words: &[&str]) -> B {
        // (`DOCUMENTATION_VALUES` and the JWT's published example.)
        self.spec.allowlists.push(AllowlistSpec {
            description: "published example values".into(),
            stopwords: words.iter().map(|s| s.to_string()).collect(),
            ..AllowlistSpec::default()
        });
        self
    }
}

fn base(id: &str, family: &str, desc: &str, kws: &[&str], regex: String, tpl: &str) -> B {
    let mut spec = RuleSpec::new(id, regex);
    spec.description = desc.into();
    spec.family = family.into();
    spec.keywords = kws.iter().map(|s| s.to_string()).collect();
    spec.keywords_case_sensitive = true;
    spec.secret_group = Some(1);
    spec.template = Some(tpl.into());
    spec.examples = vec!["{secret}".into(), "export TOKEN=\"{secret}\"".into()];
    B { spec }
}

/// A prefixed token: `regex` is the whole pattern with the secret in group 1.
fn tok(id: &str, family: &str, desc: &str, kws: &[&str], regex: &str, tpl: &str) -> B {
    base(id, family, desc, kws, regex.into(), tpl).precision(Precision::High)
}

/// A value recognised by the name it is assigned to: `(?i:key)` then
/// [`ASSIGN`] then the value (group 1) then `end`. Keywords are
/// case-insensitive. (Eight plain arguments read better in the table than
/// a builder would.)
#[allow(clippy::too_many_arguments)]
fn ctx(
    id: &str,
    family: &str,
    desc: &str,
    kws: &[&str],
    key: &str,
    value: &str,
    end: &str,
    tpl: &str,
) -> B {
    let re = format!("(?i:{key}){ASSIGN}({value}){end}");
    base(id, family, desc, kws, re, tpl)
        .ci()
        .precision(Precision::Medium)
}

fn pem(id: &str, label: &str, desc: &str, body: usize) -> B {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let re = format!(
        r"({}(?:\r?\n|\\n)(?:[A-Za-z0-9+/=:, \t\r\n]|-[A-Za-z0-9]|\\[rn]){{64,}}?{})",
        regex_syntax::escape(&begin),
        regex_syntax::escape(&end)
    );
    let tpl = format!("{begin}\n{{pem:{body}}}\n{end}");
    let kw = format!("-----BEGIN {label}");
    tok(id, "private-key", desc, &[kw.as_str()], &re, &tpl)
        .max(10 * 1024)
        .ent(4.0)
        .no_placeholder_check()
        .ex(&["{secret}", "key: |\n  {secret}\n"])
        .neg(&[
            &format!("{begin}\n...\n{end}"),
            &format!("{begin}\nMIIEpAIBAAKCAQEA<snip>\n{end}"),
            &format!("{begin}\n{{pem:40}}\n{end}"),
        ])
}

const UUID: &str = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

#[rustfmt::skip]
fn table() -> Vec<B> {
    vec![
        // ---------------------------------------------------------------- cloud
        tok("aws-access-key-id", "cloud", "AWS access key id", &["AKIA", "ASIA", "ABIA", "ACCA"],
            r"\b((?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b", "AKIA{b32:16}").ent(3.0)
            // The credential scope of a SigV4 presigned URL: the key id is
            // not secret and the URL expires within 7 days.
            .allow_line(&[r"X-Amz-Credential=(?:AKIA|ASIA)[A-Z2-7]{16}(?:%2[Ff]|/)[0-9]{8}(?:%2[Ff]|/)"])
            .neg(&["AKIAIOSFODNN7EXAMPLE", "AKIA{b32:12}", "akia{b32:16}",
                   "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600&X-Amz-Credential=AKIA{b32:16}%2F20190814%2Fus-west-2%2Fs3%2Faws4_request&X-Amz-Signature={hex:64}"]),
        tok("aws-secret-access-key", "cloud", "AWS secret access key",
            &["secret_access_key", "secretaccesskey", "secret-access-key", "aws_secret_key", "awssecretkey", "aws-secret-key"],
            r#"(?i:secret[_-]?access[_-]?key|aws[_-]?secret[_-]?key)\\?["']?\s{0,4}(?::=|=>|=|:)\s{0,4}\\?["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
            "{b64:40}").ci().ent(4.0)
            .ex(&["aws_secret_access_key = {secret}", "\"SecretAccessKey\": \"{secret}\",", "\"{\\\"awsSecretKey\\\":\\\"{secret}\\\"}\""])
            .neg(&["aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = {b64:8}"]),
        tok("aws-mws-key", "cloud", "Amazon Marketplace Web Service auth token", &["amzn.mws."],
            &format!(r"\b(amzn\.mws\.{UUID})\b"), "amzn.mws.{uuid}").neg(&["amzn.mws.{hex:8}"]),
        tok("gcp-api-key", "cloud", "Google Cloud / Firebase API key", &["AIza"],
            r"\b(AIza[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|$)", "AIza{b64url:35}").ent(3.5)
            .neg(&["AIza{b64url:20}", "AIzaxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]),
        tok("gcp-service-account-key", "cloud", "Google service-account JSON private key", &["\"private_key\""],
            r#""private_key"\s*:\s*"(-----BEGIN PRIVATE KEY-----\\n(?:[A-Za-z0-9+/=]|\\n){64,}?-----END PRIVATE KEY-----(?:\\n)?)""#,
            r"-----BEGIN PRIVATE KEY-----\n{pemjson:1620}\n-----END PRIVATE KEY-----\n")
            .prio(1).max(10 * 1024).ent(4.0).no_placeholder_check()
            .ex(&["{\"type\": \"service_account\", \"private_key\": \"{secret}\", \"client_email\": \"a@b.iam.gserviceaccount.com\"}"])
            .neg(&["\"private_key\": \"-----BEGIN PRIVATE KEY-----\\n...\\n-----END PRIVATE KEY-----\\n\""]),
        tok("gcp-oauth-client-secret", "cloud", "Google OAuth client secret", &["GOCSPX-"],
            &format!(r"\b(GOCSPX-[A-Za-z0-9_-]{{28}}){END_URL}"), "GOCSPX-{b64url:28}").ent(3.0)
            .neg(&["GOCSPX-{b64url:10}"]),
        tok("google-oauth-access-token", "cloud", "Google OAuth access token", &["ya29."],
            &format!(r"\b(ya29\.[0-9A-Za-z_-]{{30,}}){END_URL}"), "ya29.{b64url:120}").max(400).ent(3.5)
            .neg(&["ya29.{b64url:10}"]),
        tok("azure-storage-account-key", "cloud", "Azure storage account key", &["AccountKey="],
            r"(?i:AccountKey)=([A-Za-z0-9+/]{86}==)", "{b64:86}==").ci().ent(4.0)
            .ex(&["AccountKey={secret}"]).neg(&["AccountKey={b64:40}==", "AccountKey=<storage-key>"]),
        tok("azure-storage-connection-string", "cloud", "Azure storage connection string", &["DefaultEndpointsProtocol="],
            r"(?i:DefaultEndpointsProtocol)=https?;\s*(?i:AccountName)=[A-Za-z0-9]{3,24};\s*(?i:AccountKey)=([A-Za-z0-9+/]{86}==)",
            "{b64:86}==").ci().prio(1).ent(4.0)
            .ex(&["DefaultEndpointsProtocol=https;AccountName=prodstore01;AccountKey={secret};EndpointSuffix=core.windows.net"])
            .neg(&["DefaultEndpointsProtocol=https;AccountName=devstoreaccount1;AccountKey=<key>"]),
        ctx("azure-ad-client-secret", "cloud", "Azure AD (Entra ID) application client secret",
            &["client_secret", "clientsecret", "client-secret", "azure"], r"client[_-]?secret|azure[\w.-]{0,20}?secret",
            r"[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}", r"(?:[^A-Za-z0-9_~.-]|$)", "{alnum:3}{digit:1}Q~{b64url:34}")
            .ent(3.5).ex(&["AZURE_CLIENT_SECRET=\"{secret}\""]).neg(&["AZURE_CLIENT_SECRET=\"abc1Q~short\""]),
        tok("azure-devops-pat", "cloud", "Azure DevOps personal access token (84 characters)", &["AZDO"],
            r"\b([A-Za-z0-9]{76}AZDO[A-Za-z0-9]{4})\b", "{alnum:76}AZDO{alnum:4}").ent(4.0)
            .neg(&["{alnum:40}AZDO{alnum:4}"]),
        tok("digitalocean-pat", "cloud", "DigitalOcean personal access token", &["dop_v1_"],
            r"\b(dop_v1_[a-f0-9]{64})\b", "dop_v1_{hex:64}").ent(3.0).neg(&["dop_v1_{hex:32}"]),
        tok("digitalocean-oauth-token", "cloud", "DigitalOcean OAuth access token", &["doo_v1_"],
            r"\b(doo_v1_[a-f0-9]{64})\b", "doo_v1_{hex:64}").ent(3.0).neg(&["doo_v1_{hex:32}"]),
        tok("digitalocean-refresh-token", "cloud", "DigitalOcean OAuth refresh token", &["dor_v1_"],
            r"\b(dor_v1_[a-f0-9]{64})\b", "dor_v1_{hex:64}").ent(3.0).neg(&["dor_v1_{hex:63}"]),
        tok("alibaba-access-key-id", "cloud", "Alibaba Cloud AccessKey id", &["LTAI"],
            r"\b(LTAI[A-Za-z0-9]{20})\b", "LTAI{alnum:20}").ent(3.0).neg(&["LTAI{alnum:10}"]),
        ctx("alibaba-access-key-secret", "cloud", "Alibaba Cloud AccessKey secret",
            &["alibaba", "aliyun", "accesskeysecret", "access_key_secret"], r"alibaba|aliyun|access[_-]?key[_-]?secret",
            "[A-Za-z0-9]{30}", r"\b", "{alnum:30}").ent(3.5)
            .ex(&["ALIYUN_ACCESS_KEY_SECRET={secret}"]).neg(&["aliyun_secret = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""]),
        ctx("ibm-cloud-api-key", "cloud", "IBM Cloud API key", &["ibm"], r"ibm[\w.-]{0,20}?(?:api[_-]?key|apikey|key)",
            "[A-Za-z0-9_-]{44}", END_URL, "{b64url:44}").ent(3.5)
            .ex(&["IBM_CLOUD_API_KEY = \"{secret}\""]).neg(&["IBM_CLOUD_API_KEY = \"<ibm-api-key>\""]),
        tok("heroku-api-key-v2", "cloud", "Heroku API key (HRKU- format)", &["HRKU-AA"],
            &format!(r"\b(HRKU-AA[0-9A-Za-z_-]{{58}}){END_URL}"), "HRKU-AA{b64url:58}").ent(3.5).neg(&["HRKU-AA{b64url:20}"]),
        ctx("heroku-api-key", "cloud", "Heroku API key (UUID format)", &["heroku"], "heroku", UUID, r"\b", "{uuid}").ent(3.0)
            .ex(&["HEROKU_API_KEY={secret}"]).neg(&["HEROKU_API_KEY=00000000-0000-4000-8000-000000000000"]),
        ctx("cloudflare-api-token", "cloud", "Cloudflare API token", &["cloudflare", "cf_api_token"], r"cloudflare|cf_api_token",
            "[A-Za-z0-9_-]{40}", END_URL, "{b64url:40}").ent(3.5)
            .ex(&["CLOUDFLARE_API_TOKEN: {secret}"]).neg(&["CLOUDFLARE_API_TOKEN: <token>"]),
        ctx("cloudflare-global-api-key", "cloud", "Cloudflare global API key", &["cloudflare"], "cloudflare",
            "[a-f0-9]{37}", r"\b", "{hex:37}").ent(3.0)
            .ex(&["cloudflare_global_key = \"{secret}\""]).neg(&["cloudflare_global_key = \"{hex:36}\""]),
        tok("cloudflare-origin-ca-key", "cloud", "Cloudflare Origin CA key", &["v1.0-"],
            r"\b(v1\.0-[a-f0-9]{24}-[a-f0-9]{146})\b", "v1.0-{hex:24}-{hex:146}").ent(3.0).neg(&["v1.0-{hex:24}-{hex:100}"]),
        ctx("linode-pat", "cloud", "Linode personal access token", &["linode"], "linode", "[a-f0-9]{64}", r"\b", "{hex:64}").ent(3.0)
            .ex(&["LINODE_TOKEN=\"{secret}\""]).neg(&["LINODE_TOKEN=\"{hex:24}\""]),
        ctx("scaleway-secret-key", "cloud", "Scaleway secret key", &["scw_secret", "scaleway"], r"scw_secret|scaleway",
            UUID, r"\b", "{uuid}").ent(3.0).ex(&["SCW_SECRET_KEY={secret}"]).neg(&["SCW_SECRET_KEY=<secret-key>"]),
        ctx("vultr-api-key", "cloud", "Vultr API key", &["vultr"], "vultr", "[A-Z0-9]{36}", r"\b", "{upalnum:36}").ent(3.5)
            .ex(&["VULTR_API_KEY = '{secret}'"]).neg(&["VULTR_API_KEY = '{upalnum:20}'"]),
        ctx("hetzner-cloud-token", "cloud", "Hetzner Cloud API token", &["hcloud", "hetzner"], "hcloud|hetzner",
            "[A-Za-z0-9]{64}", r"\b", "{alnum:64}").ent(4.0)
            .ex(&["HCLOUD_TOKEN={secret}"]).neg(&["HCLOUD_TOKEN=${HCLOUD_TOKEN}"]),
        tok("tencent-cloud-secret-id", "cloud", "Tencent Cloud SecretId", &["AKID"],
            r"\b(AKID[A-Za-z0-9]{32})\b", "AKID{alnum:32}").ent(3.5).neg(&["AKID{alnum:16}"]),
        tok("flyio-token", "cloud", "Fly.io access token", &["fo1_"],
            &format!(r"\b(fo1_[A-Za-z0-9_-]{{43}}){END_URL}"), "fo1_{b64url:43}").ent(3.5).neg(&["fo1_{b64url:20}"]),
        tok("supabase-pat", "cloud", "Supabase personal access token", &["sbp_"],
            r"\b(sbp_[a-z0-9]{40})\b", "sbp_{hex:40}").ent(3.0).neg(&["sbp_{hex:20}"]),
        tok("planetscale-token", "cloud", "PlanetScale service token", &["pscale_tkn_"],
            r"\b(pscale_tkn_[A-Za-z0-9_.-]{43})(?:[^A-Za-z0-9_.-]|$)", "pscale_tkn_{b64url:43}").ent(3.5).neg(&["pscale_tkn_{b64url:20}"]),
        tok("planetscale-password", "cloud", "PlanetScale database password", &["pscale_pw_"],
            r"\b(pscale_pw_[A-Za-z0-9_.-]{43})(?:[^A-Za-z0-9_.-]|$)", "pscale_pw_{b64url:43}").ent(3.5).neg(&["pscale_pw_{b64url:20}"]),
        ctx("netlify-token", "cloud", "Netlify access token", &["netlify"], "netlify", "[a-f0-9]{64}|[A-Za-z0-9_-]{40,46}", END_URL, "{b64url:43}")
            .ent(3.5).ex(&["NETLIFY_AUTH_TOKEN={secret}"]).neg(&["NETLIFY_AUTH_TOKEN=changeme"]),
        tok("yandex-api-key", "cloud", "Yandex Cloud API key", &["AQVN"],
            &format!(r"\b(AQVN[A-Za-z0-9_-]{{35,38}}){END_URL}"), "AQVN{b64url:36}").ent(3.5).neg(&["AQVN{b64url:10}"]),
        // ------------------------------------------------- source hosting and CI
        tok("github-pat", "source-ci", "GitHub personal access token (classic)", &["ghp_"],
            r"\b(ghp_[A-Za-z0-9]{36})\b", "ghp_{alnum:36}").ent(3.5)
            .neg(&["ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "ghp_{alnum:20}", "ghp_{alnum:40}"]),
        tok("github-fine-grained-pat", "source-ci", "GitHub fine-grained personal access token", &["github_pat_"],
            r"\b(github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})\b", "github_pat_11{upalnum:20}_{alnum:59}").ent(3.5)
            .neg(&["github_pat_{alnum:22}_{alnum:20}"]),
        tok("github-oauth-token", "source-ci", "GitHub OAuth access token", &["gho_"],
            r"\b(gho_[A-Za-z0-9]{36})\b", "gho_{alnum:36}").ent(3.5).neg(&["gho_{alnum:30}"]),
        tok("github-user-to-server-token", "source-ci", "GitHub App user-to-server token", &["ghu_"],
            r"\b(ghu_[A-Za-z0-9]{36})\b", "ghu_{alnum:36}").ent(3.5).neg(&["ghu_{alnum:30}"]),
        tok("github-app-token", "source-ci", "GitHub App installation (server-to-server) token, classic 36 and long formats", &["ghs_"],
            r"\b(ghs_[A-Za-z0-9]{36,255})\b", "ghs_{alnum:36-200}").ent(3.5)
            .ex(&["{secret}", "GITHUB_TOKEN={secret}", "git clone https://x-access-token:{secret}@github.com/o/r.git"])
            .neg(&["ghs_{alnum:30}"]),
        tok("github-refresh-token", "source-ci", "GitHub refresh token", &["ghr_"],
            r"\b(ghr_[A-Za-z0-9]{36,76})\b", "ghr_{alnum:76}").ent(3.5).neg(&["ghr_{alnum:30}"]),
        tok("gitlab-pat", "source-ci", "GitLab personal access token", &["glpat-"],
            &format!(r"\b(glpat-[A-Za-z0-9_-]{{20,64}}(?:\.[0-9a-z]{{2}}\.[0-9a-z]{{9}})?){END_URL}"), "glpat-{b64url:20}").ent(3.0)
            .neg(&["glpat-{b64url:12}", "glpat-xxxxxxxxxxxxxxxxxxxx"]),
        tok("gitlab-pipeline-trigger-token", "source-ci", "GitLab pipeline trigger token", &["glptt-"],
            r"\b(glptt-[0-9a-f]{40})\b", "glptt-{hex:40}").ent(3.0).neg(&["glptt-{hex:20}"]),
        tok("gitlab-runner-token", "source-ci", "GitLab runner authentication token", &["glrt-"],
            &format!(r"\b(glrt-[A-Za-z0-9_-]{{20,64}}){END_URL}"), "glrt-{b64url:24}").ent(3.0).neg(&["glrt-{b64url:10}"]),
        tok("gitlab-runner-registration-token", "source-ci", "GitLab runner registration token", &["GR1348941"],
            &format!(r"\b(GR1348941[A-Za-z0-9_-]{{20}}){END_URL}"), "GR1348941{b64url:20}").ent(3.0).neg(&["GR1348941{b64url:8}"]),
        tok("gitlab-deploy-token", "source-ci", "GitLab deploy token", &["gldt-"],
            &format!(r"\b(gldt-[A-Za-z0-9_-]{{20,64}}){END_URL}"), "gldt-{b64url:20}").ent(3.0).neg(&["gldt-{b64url:10}"]),
        tok("gitlab-feed-token", "source-ci", "GitLab feed token", &["glft-"],
            &format!(r"\b(glft-[A-Za-z0-9_-]{{20,64}}){END_URL}"), "glft-{b64url:20}").ent(3.0).neg(&["glft-{b64url:10}"]),
        tok("gitlab-oauth-app-secret", "source-ci", "GitLab OAuth application secret", &["gloas-"],
            r"\b(gloas-[a-f0-9]{64})\b", "gloas-{hex:64}").ent(3.0).neg(&["gloas-{hex:32}"]),
        tok("gitlab-ci-job-token", "source-ci", "GitLab CI/CD job token", &["glcbt-"],
            &format!(r"\b(glcbt-[0-9a-f]{{1,5}}_[A-Za-z0-9_-]{{20}}){END_URL}"), "glcbt-{hex:2}_{b64url:20}").ent(3.0)
            .neg(&["glcbt-{hex:2}_{b64url:8}"]),
        tok("gitlab-incoming-mail-token", "source-ci", "GitLab incoming e-mail token", &["glimt-"],
            &format!(r"\b(glimt-[A-Za-z0-9_-]{{25}}){END_URL}"), "glimt-{b64url:25}").ent(3.0).neg(&["glimt-{b64url:10}"]),
        tok("gitlab-scim-token", "source-ci", "GitLab SCIM OAuth token", &["glsoat-"],
            &format!(r"\b(glsoat-[A-Za-z0-9_-]{{20}}){END_URL}"), "glsoat-{b64url:20}").ent(3.0).neg(&["glsoat-{b64url:10}"]),
        tok("bitbucket-app-password", "source-ci", "Bitbucket app password", &["ATBB"],
            r"\b(ATBB[A-Za-z0-9_=.-]{32})(?:[^A-Za-z0-9_=.-]|$)", "ATBB{alnum:32}").ent(3.5).neg(&["ATBB{alnum:16}"]),
        tok("npm-token", "source-ci", "npm access token", &["npm_"],
            r"\b(npm_[A-Za-z0-9]{36})\b", "npm_{alnum:36}").ent(3.5).neg(&["npm_{alnum:20}", "npm_install_dependencies_for_project_x"]),
        tok("pypi-token", "source-ci", "PyPI upload token", &["pypi-AgEIcHlwaS5vcmc"],
            &format!(r"\b(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{{50,}}){END_URL}"), "pypi-AgEIcHlwaS5vcmc{b64url:150}").max(400).ent(4.0)
            .neg(&["pypi-AgEIcHlwaS5vcmc{b64url:20}"]),
        tok("rubygems-api-key", "source-ci", "RubyGems API key", &["rubygems_"],
            r"\b(rubygems_[a-f0-9]{48})\b", "rubygems_{hex:48}").ent(3.0).neg(&["rubygems_{hex:20}"]),
        tok("nuget-api-key", "source-ci", "NuGet API key", &["oy2"],
            r"\b(oy2[a-z0-9]{43})\b", "oy2{lowalnum:43}").ent(3.5).neg(&["oy2{lowalnum:20}"]),
        tok("dockerhub-pat", "source-ci", "Docker Hub personal access token", &["dckr_pat_"],
            &format!(r"\b(dckr_pat_[A-Za-z0-9_-]{{27}}){END_URL}"), "dckr_pat_{b64url:27}").ent(3.5).neg(&["dckr_pat_{b64url:10}"]),
        tok("dockerhub-org-token", "source-ci", "Docker Hub organization access token", &["dckr_oat_"],
            &format!(r"\b(dckr_oat_[A-Za-z0-9_-]{{32}}){END_URL}"), "dckr_oat_{b64url:32}").ent(3.5).neg(&["dckr_oat_{b64url:10}"]),
        tok("circleci-pat", "source-ci", "CircleCI personal API token", &["CCIPAT_"],
            r"\b(CCIPAT_[A-Za-z0-9]{22,24}_[a-z0-9]{40})\b", "CCIPAT_{alnum:22}_{hex:40}").ent(3.5).neg(&["CCIPAT_{alnum:22}_{hex:10}"]),
        ctx("circleci-token", "source-ci", "CircleCI API token", &["circleci", "circle_token"], "circleci|circle_token",
            "[a-f0-9]{40}", r"\b", "{hex:40}").ent(3.0).ex(&["CIRCLE_TOKEN={secret}"]).neg(&["CIRCLE_TOKEN={hex:20}"]),
        ctx("travis-ci-token", "source-ci", "Travis CI API token", &["travis"], "travis", "[A-Za-z0-9_-]{22}", END_URL, "{b64url:22}")
            .ent(3.5).ex(&["TRAVIS_API_TOKEN: {secret}"]).neg(&["TRAVIS_API_TOKEN: {b64url:10}"]),
        tok("buildkite-token", "source-ci", "Buildkite API access token", &["bkua_"],
            r"\b(bkua_[a-z0-9]{40})\b", "bkua_{hex:40}").ent(3.0).neg(&["bkua_{hex:20}"]),
        tok("jfrog-api-key", "source-ci", "JFrog Artifactory API key", &["AKCp"],
            r"\b(AKCp[A-Za-z0-9]{69})\b", "AKCp{alnum:69}").ent(4.0).neg(&["AKCp{alnum:30}"]),
        tok("jfrog-reference-token", "source-ci", "JFrog reference token", &["cmVmdGtu"],
            r"\b(cmVmdGtu[A-Za-z0-9]{56})\b", "cmVmdGtu{alnum:56}").ent(4.0).neg(&["cmVmdGtu{alnum:20}"]),
        tok("sonarqube-token", "source-ci", "SonarQube / SonarCloud token", &["sqp_", "squ_", "sqa_"],
            r"\b(sq[pua]_[a-f0-9]{40})\b", "sqp_{hex:40}").ent(3.0).neg(&["sqp_{hex:20}"]),
        tok("terraform-cloud-token", "source-ci", "HashiCorp Terraform Cloud API token", &[".atlasv1."],
            r"\b([A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70})(?:[^A-Za-z0-9_=-]|$)", "{alnum:14}.atlasv1.{b64url:67}").ent(4.0)
            .neg(&["{alnum:14}.atlasv1.{b64url:20}"]),
        tok("vault-service-token", "source-ci", "HashiCorp Vault service token", &["hvs."],
            &format!(r"\b(hvs\.[A-Za-z0-9_-]{{90,120}}){END_URL}"), "hvs.{b64url:95}").ent(4.0).neg(&["hvs.{b64url:24}"]),
        ctx("vault-legacy-token", "source-ci", "HashiCorp Vault token, legacy s. format (before Vault 1.10)",
            &["vault"], r"vault[\w.-]{0,20}?token|x-vault-token", r"s\.[A-Za-z0-9]{24}", r"\b", "s.{alnum:24}").ent(3.5)
            .ex(&["VAULT_TOKEN={secret}", "X-Vault-Token: {secret}"]).neg(&["VAULT_TOKEN=s.{alnum:10}", "VAULT_TOKEN=s.xxxxxxxxxxxxxxxxxxxxxxxx"]),
        tok("vault-batch-token", "source-ci", "HashiCorp Vault batch token", &["hvb."],
            &format!(r"\b(hvb\.[A-Za-z0-9_-]{{138,}}){END_URL}"), "hvb.{b64url:140}").max(400).ent(4.0).neg(&["hvb.{b64url:24}"]),
        tok("harness-pat", "source-ci", "Harness personal access token", &["pat."],
            r"\b(pat\.[A-Za-z0-9_-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20})\b", "pat.{b64url:22}.{hex:24}.{alnum:20}").ent(3.5)
            .neg(&["pat.{b64url:22}.{hex:10}.{alnum:20}"]),
        ctx("snyk-token", "source-ci", "Snyk API token", &["snyk"], "snyk", UUID, r"\b", "{uuid}").ent(3.0)
            .ex(&["SNYK_TOKEN={secret}"]).neg(&["SNYK_TOKEN=your-snyk-token"]),
        ctx("codecov-token", "source-ci", "Codecov upload token", &["codecov"], "codecov", UUID, r"\b", "{uuid}").ent(3.0)
            .ex(&["CODECOV_TOKEN: {secret}"]).neg(&["CODECOV_TOKEN: ${{ secrets.CODECOV_TOKEN }}"]),
        tok("octopus-deploy-api-key", "source-ci", "Octopus Deploy API key", &["API-"],
            r"\b(API-[A-Z0-9]{26})\b", "API-{upalnum:26}").ent(3.5).neg(&["API-{upalnum:10}", "API-KEY-PLACEHOLDER-VALUE-XXXXX"]),
        // --------------------------------------------------- chat and webhooks
        tok("slack-bot-token", "chat", "Slack bot token", &["xoxb-"],
            r"\b(xoxb-[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{24})\b", "xoxb-{digit:12}-{digit:13}-{alnum:24}").ent(3.0)
            .neg(&["xoxb-not-a-real-token-this-will-not-work", "xoxb-{digit:12}-{digit:13}-{alnum:10}"]),
        tok("slack-user-token", "chat", "Slack user token", &["xoxp-"],
            r"\b(xoxp-[0-9]{10,13}-[0-9]{10,13}-[0-9]{10,13}-[a-f0-9]{32})\b", "xoxp-{digit:12}-{digit:12}-{digit:13}-{hex:32}").ent(3.0)
            .neg(&["xoxp-{digit:12}-{digit:12}-{digit:13}-{hex:10}"]),
        tok("slack-app-token", "chat", "Slack app-level token", &["xapp-"],
            r"\b(xapp-[0-9]-[A-Z0-9]{9,11}-[0-9]{10,13}-[a-f0-9]{64})\b", "xapp-1-A{upalnum:10}-{digit:13}-{hex:64}").ent(3.0)
            .neg(&["xapp-1-A{upalnum:10}-{digit:13}-{hex:20}"]),
        tok("slack-config-token", "chat", "Slack configuration access token", &["xoxe.xox"],
            r"\b(xoxe\.xox[bp]-[0-9]-[A-Za-z0-9]{140,170})\b", "xoxe.xoxp-1-{upalnum:164}").ent(3.5)
            .neg(&["xoxe.xoxp-1-{upalnum:40}"]),
        tok("slack-config-refresh-token", "chat", "Slack configuration refresh token", &["xoxe-"],
            r"\b(xoxe-[0-9]-[A-Za-z0-9]{140,170})\b", "xoxe-1-{upalnum:146}").ent(3.5).neg(&["xoxe-1-{upalnum:40}"]),
        tok("slack-webhook-url", "chat", "Slack incoming webhook URL", &["hooks.slack.com"],
            r"(https://hooks\.slack\.com/services/T[A-Za-z0-9]{8,12}/B[A-Za-z0-9]{8,12}/[A-Za-z0-9]{24})\b",
            "https://hooks.slack.com/services/T{upalnum:10}/B{upalnum:10}/{alnum:24}").ent(3.5).ci()
            .neg(&["https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"]),
        tok("slack-workflow-webhook-url", "chat", "Slack workflow (Workflow Builder) webhook trigger URL", &["hooks.slack.com"],
            r"(https://hooks\.slack\.com/(?:workflows|triggers)/T[A-Z0-9]{8,12}/A[A-Z0-9]{8,12}/[0-9]{15,20}/[A-Za-z0-9]{24,32})\b",
            "https://hooks.slack.com/triggers/T{upalnum:10}/A{upalnum:10}/{digit:18}/{alnum:32}").ent(3.5).ci()
            .ex(&["{secret}", "SLACK_WORKFLOW_URL={secret}"])
            .neg(&["https://hooks.slack.com/triggers/T00000000/A00000000/000000000000000/XXXXXXXXXXXXXXXXXXXXXXXX"]),
        ctx("discord-bot-token", "chat", "Discord bot token", &["discord"], "discord",
            r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}", END_URL, "M{b64url:25}.{b64url:6}.{b64url:38}")
            .ent(4.0).ex(&["DISCORD_BOT_TOKEN=\"{secret}\""]).neg(&["DISCORD_BOT_TOKEN=\"MTAxxxxxxxxxxxxxxxxxxxxx.Gxxxxx.xxxxxxxxxxxxxxxxxxxxxxxxxxx\""]),
        tok("discord-webhook-url", "chat", "Discord webhook URL", &["/api/webhooks/"],
            &format!(r"(https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{{17,20}}/[A-Za-z0-9_-]{{60,68}}){END_URL}"),
            "https://discord.com/api/webhooks/{digit:19}/{b64url:68}").ent(4.0)
            .neg(&["https://discord.com/api/webhooks/{digit:19}/{b64url:20}"]),
        tok("telegram-bot-token", "chat", "Telegram bot token", &[":AA"],
            &format!(r"\b([0-9]{{8,10}}:AA[A-Za-z0-9_-]{{33}}){END_URL}"), "{digit:10}:AA{b64url:33}").ent(3.5)
            .neg(&["{digit:10}:AA{b64url:20}", "123456789:AAxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]),
        tok("teams-workflow-webhook-url", "chat", "Microsoft Teams / Power Automate workflow webhook URL (signed logic.azure.com trigger)", &[".logic.azure.com"],
            r"(https://[a-z0-9-]{1,40}\.[a-z0-9-]{1,40}\.logic\.azure\.com(?::443)?/workflows/[a-f0-9]{32}/triggers/[A-Za-z0-9_]{1,40}/paths/invoke\?[A-Za-z0-9_.=&%-]{0,120}?sig=[A-Za-z0-9_%-]{43,64})",
            "https://prod-27.westeurope.logic.azure.com:443/workflows/{hex:32}/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={b64url:43}")
            .ent(3.5).ci().max(400)
            .neg(&["https://prod-27.westeurope.logic.azure.com:443/workflows/{hex:32}/triggers/manual/paths/invoke?api-version=2016-06-01"]),
        tok("teams-webhook-url", "chat", "Microsoft Teams incoming webhook URL", &["webhook.office.com"],
            &format!(r"(https://[a-z0-9-]{{1,63}}\.webhook\.office\.com/webhookb2/{UUID}@{UUID}/IncomingWebhook/[a-f0-9]{{32}}/{UUID})\b"),
            "https://contoso.webhook.office.com/webhookb2/{uuid}@{uuid}/IncomingWebhook/{hex:32}/{uuid}").ent(3.5).ci()
            .neg(&["https://contoso.webhook.office.com/webhookb2/<group-id>@<tenant-id>/IncomingWebhook/<id>/<owner>"]),
        ctx("mattermost-token", "chat", "Mattermost access token", &["mattermost"], "mattermost", "[a-z0-9]{26}", r"\b", "{lowalnum:26}")
            .ent(3.5).ex(&["MATTERMOST_TOKEN={secret}"]).neg(&["MATTERMOST_TOKEN={lowalnum:10}"]),
        ctx("twitch-token", "chat", "Twitch API token", &["twitch"], "twitch", "[a-z0-9]{30}", r"\b", "{lowalnum:30}")
            .ent(3.5).ex(&["twitch_oauth_token: {secret}"]).neg(&["twitch_oauth_token: {lowalnum:10}"]),
        // -------------------------------------------------------------- payment
        tok("stripe-secret-key", "payment", "Stripe live secret key", &["sk_live_"],
            r"\b(sk_live_[A-Za-z0-9]{24,99})\b", "sk_live_{alnum:24-99}").ent(3.5).neg(&["sk_live_{alnum:10}"]),
        tok("stripe-test-secret-key", "payment", "Stripe test-mode secret key", &["sk_test_"],
            r"\b(sk_test_[A-Za-z0-9]{24,99})\b", "sk_test_{alnum:24-99}").ent(3.5)
            .stopwords(&["4eC39HqLyjWDarjtT1zdp7dc"]).neg(&["sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_{alnum:10}"]),
        tok("stripe-restricted-key", "payment", "Stripe restricted key", &["rk_live_", "rk_test_"],
            r"\b(rk_(?:live|test)_[A-Za-z0-9]{24,99})\b", "rk_live_{alnum:24-99}").ent(3.5).neg(&["rk_live_{alnum:10}"]),
        tok("stripe-publishable-live-key", "payment", "Stripe live publishable key", &["pk_live_"],
            r"\b(pk_live_[A-Za-z0-9]{24,99})\b", "pk_live_{alnum:24-99}").ent(3.5).neg(&["pk_live_{alnum:10}"]),
        tok("stripe-webhook-secret", "payment", "Stripe webhook signing secret", &["whsec_"],
            &format!(r"\b(whsec_[A-Za-z0-9+/]{{32,64}}){END_B64}"), "whsec_{alnum:32}").ent(3.5).neg(&["whsec_{alnum:10}"]),
        tok("square-access-token", "payment", "Square production access token", &["EAAA"],
            &format!(r"\b(EAAA[A-Za-z0-9_-]{{59,64}}){END_URL}"), "EAAA{b64url:60}").ent(4.0).neg(&["EAAA{b64url:30}"]),
        tok("square-oauth-token", "payment", "Square OAuth access token", &["sq0atp-"],
            &format!(r"\b(sq0atp-[A-Za-z0-9_-]{{22}}){END_URL}"), "sq0atp-{b64url:22}").ent(3.5).neg(&["sq0atp-{b64url:10}"]),
        tok("square-oauth-secret", "payment", "Square OAuth application secret", &["sq0csp-"],
            &format!(r"\b(sq0csp-[A-Za-z0-9_-]{{43}}){END_URL}"), "sq0csp-{b64url:43}").ent(3.5).neg(&["sq0csp-{b64url:10}"]),
        tok("braintree-access-token", "payment", "PayPal Braintree production access token", &["access_token$production$"],
            r"\b(access_token\$production\$[0-9a-z]{16}\$[0-9a-f]{32})\b", "access_token$production${lowalnum:16}${hex:32}").ent(3.5)
            .neg(&["access_token$production${lowalnum:16}${hex:8}"]),
        ctx("paypal-client-secret", "payment", "PayPal REST client secret", &["paypal"], r"paypal[\w.-]{0,20}?secret",
            "E[A-Za-z0-9_-]{79}", END_URL, "E{b64url:79}").ent(4.0)
            .ex(&["PAYPAL_CLIENT_SECRET={secret}"]).neg(&["PAYPAL_CLIENT_SECRET=EXXXXXXXXXXXXXXXX"]),
        ctx("adyen-api-key", "payment", "Adyen API key", &["adyen"], "adyen", r"AQE[A-Za-z0-9+/=._-]{80,200}",
            r"(?:[^A-Za-z0-9+/=._-]|$)", "AQE{b64url:120}").ent(4.0)
            .ex(&["ADYEN_API_KEY=\"{secret}\""]).neg(&["ADYEN_API_KEY=\"AQE...\""]),
        tok("razorpay-key-id", "payment", "Razorpay key id", &["rzp_live_", "rzp_test_"],
            r"\b(rzp_(?:live|test)_[A-Za-z0-9]{14})\b", "rzp_live_{alnum:14}").ent(3.0).neg(&["rzp_live_{alnum:6}"]),
        ctx("razorpay-key-secret", "payment", "Razorpay key secret", &["razorpay"], r"razorpay[\w.-]{0,20}?secret",
            "[A-Za-z0-9]{24}", r"\b", "{alnum:24}").ent(3.5)
            .ex(&["RAZORPAY_KEY_SECRET={secret}"]).neg(&["RAZORPAY_KEY_SECRET={alnum:10}"]),
        tok("flutterwave-secret-key", "payment", "Flutterwave secret key", &["FLWSECK"],
            r"\b(FLWSECK(?:_TEST)?-[a-f0-9]{32}-X)\b", "FLWSECK-{hex:32}-X").ent(3.0).neg(&["FLWSECK-{hex:20}-X"]),
        ctx("plaid-secret", "payment", "Plaid API secret", &["plaid"], r"plaid[\w.-]{0,20}?secret", "[a-f0-9]{30}", r"\b", "{hex:30}")
            .ent(3.0).ex(&["PLAID_SECRET={secret}"]).neg(&["PLAID_SECRET={hex:12}"]),
        tok("mollie-api-key", "payment", "Mollie live API key", &["live_"],
            r"\b(live_[A-Za-z0-9]{30})\b", "live_{alnum:30}").ent(3.5).neg(&["live_{alnum:12}", "live_reload_enabled_for_dev_server"]),
        // ------------------------------------------------------------- AI APIs
        tok("openai-api-key", "ai", "OpenAI API key (legacy format)", &["T3BlbkFJ"],
            r"\b(sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})\b", "sk-{alnum:20}T3BlbkFJ{alnum:20}").ent(3.5)
            .neg(&["sk-{alnum:20}T3BlbkFJ{alnum:8}"]),
        tok("openai-project-key", "ai", "OpenAI project API key", &["sk-proj-"],
            &format!(r"\b(sk-proj-[A-Za-z0-9_-]{{40,}}){END_URL}"), "sk-proj-{b64url:74}T3BlbkFJ{b64url:74}").max(300).ent(4.0)
            .neg(&["sk-proj-{b64url:20}", "sk-proj-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]),
        tok("openai-service-account-key", "ai", "OpenAI service-account API key", &["sk-svcacct-"],
            &format!(r"\b(sk-svcacct-[A-Za-z0-9_-]{{40,}}){END_URL}"), "sk-svcacct-{b64url:74}T3BlbkFJ{b64url:74}").max(300).ent(4.0)
            .neg(&["sk-svcacct-{b64url:20}"]),
        tok("openai-admin-key", "ai", "OpenAI admin API key", &["sk-admin-"],
            &format!(r"\b(sk-admin-[A-Za-z0-9_-]{{40,}}){END_URL}"), "sk-admin-{b64url:74}T3BlbkFJ{b64url:74}").max(300).ent(4.0)
            .neg(&["sk-admin-{b64url:20}"]),
        tok("anthropic-api-key", "ai", "Anthropic API key", &["sk-ant-api03-"],
            &format!(r"\b(sk-ant-api03-[A-Za-z0-9_-]{{93}}AA){END_URL}"), "sk-ant-api03-{b64url:93}AA").ent(4.0)
            .neg(&["sk-ant-api03-{b64url:40}AA"]),
        tok("anthropic-admin-key", "ai", "Anthropic admin API key", &["sk-ant-admin01-"],
            &format!(r"\b(sk-ant-admin01-[A-Za-z0-9_-]{{93}}AA){END_URL}"), "sk-ant-admin01-{b64url:93}AA").ent(4.0)
            .neg(&["sk-ant-admin01-{b64url:40}AA"]),
        tok("huggingface-token", "ai", "Hugging Face access token", &["hf_"],
            r"\b(hf_[A-Za-z]{34})\b", "hf_{alpha:34}").ent(3.5).neg(&["hf_{alpha:20}", "hf_hub_download_cache_directory_pa"]),
        tok("huggingface-org-token", "ai", "Hugging Face organization API token", &["api_org_"],
            r"\b(api_org_[A-Za-z]{34})\b", "api_org_{alpha:34}").ent(3.5).neg(&["api_org_{alpha:20}"]),
        ctx("cohere-api-key", "ai", "Cohere API key", &["cohere", "co_api_key"], "cohere|co_api_key", "[A-Za-z0-9]{40}", r"\b", "{alnum:40}")
            .ent(4.0).ex(&["COHERE_API_KEY={secret}"]).neg(&["COHERE_API_KEY=your-cohere-key"]),
        tok("groq-api-key", "ai", "Groq API key", &["gsk_"],
            r"\b(gsk_[A-Za-z0-9]{52})\b", "gsk_{alnum:52}").ent(4.0).neg(&["gsk_{alnum:20}"]),
        tok("replicate-api-token", "ai", "Replicate API token", &["r8_"],
            r"\b(r8_[A-Za-z0-9]{37})\b", "r8_{alnum:37}").ent(3.5).neg(&["r8_{alnum:20}"]),
        tok("perplexity-api-key", "ai", "Perplexity API key", &["pplx-"],
            r"\b(pplx-[A-Za-z0-9]{48})\b", "pplx-{alnum:48}").ent(4.0).neg(&["pplx-{alnum:20}"]),
        tok("xai-api-key", "ai", "xAI API key", &["xai-"],
            r"\b(xai-[A-Za-z0-9]{80})\b", "xai-{alnum:80}").ent(4.0).neg(&["xai-{alnum:30}"]),
        tok("openrouter-api-key", "ai", "OpenRouter API key", &["sk-or-v1-"],
            r"\b(sk-or-v1-[a-f0-9]{64})\b", "sk-or-v1-{hex:64}").ent(3.0).neg(&["sk-or-v1-{hex:20}"]),
        tok("langsmith-api-key", "ai", "LangSmith API key", &["lsv2_"],
            r"\b(lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10})\b", "lsv2_pt_{hex:32}_{hex:10}").ent(3.0).neg(&["lsv2_pt_{hex:32}"]),
        ctx("mistral-api-key", "ai", "Mistral AI API key", &["mistral"], "mistral", "[A-Za-z0-9]{32}", r"\b", "{alnum:32}")
            .ent(4.0).ex(&["MISTRAL_API_KEY=\"{secret}\""]).neg(&["MISTRAL_API_KEY=\"{alnum:8}\""]),
        tok("pinecone-api-key", "ai", "Pinecone API key", &["pcsk_"],
            r"\b(pcsk_[A-Za-z0-9]{5,6}_[A-Za-z0-9]{60,70})\b", "pcsk_{alnum:5}_{alnum:63}").ent(4.0).neg(&["pcsk_{alnum:5}_{alnum:20}"]),
        ctx("deepseek-api-key", "ai", "DeepSeek API key", &["deepseek"], "deepseek", "sk-[a-f0-9]{32}", r"\b", "sk-{hex:32}")
            .ent(3.0).ex(&["DEEPSEEK_API_KEY={secret}"]).neg(&["DEEPSEEK_API_KEY=sk-{hex:6}"]),
        ctx("wandb-api-key", "ai", "Weights & Biases API key", &["wandb"], "wandb", "[a-f0-9]{40}", r"\b", "{hex:40}")
            .ent(3.0).ex(&["WANDB_API_KEY={secret}"]).neg(&["WANDB_API_KEY={hex:20}"]),
        ctx("assemblyai-api-key", "ai", "AssemblyAI API key", &["assemblyai"], "assemblyai", "[a-f0-9]{32}", r"\b", "{hex:32}")
            .ent(3.0).ex(&["ASSEMBLYAI_API_KEY={secret}"]).neg(&["ASSEMBLYAI_API_KEY={hex:12}"]),
        // ----------------------------------------------------------------- SaaS
        tok("sendgrid-api-key", "saas", "SendGrid API key", &["SG."],
            &format!(r"\b(SG\.[A-Za-z0-9_-]{{22}}\.[A-Za-z0-9_-]{{43}}){END_URL}"), "SG.{b64url:22}.{b64url:43}").ent(4.0)
            .neg(&["SG.{b64url:22}.{b64url:10}"]),
        ctx("twilio-api-key", "saas", "Twilio API key SID", &["twilio"], "twilio", "SK[0-9a-fA-F]{32}", r"\b", "SK{hex:32}")
            .ent(3.0).ex(&["TWILIO_API_KEY={secret}"]).neg(&["TWILIO_API_KEY=SK{hex:10}"]),
        ctx("twilio-auth-token", "saas", "Twilio auth token", &["twilio"], r"twilio[\w.-]{0,20}?auth", "[a-f0-9]{32}", r"\b", "{hex:32}")
            .ent(3.0).ex(&["TWILIO_AUTH_TOKEN={secret}"]).neg(&["TWILIO_AUTH_TOKEN={hex:16}"]),
        ctx("mailgun-api-key", "saas", "Mailgun API key", &["mailgun"], "mailgun", "key-[a-f0-9]{32}", r"\b", "key-{hex:32}")
            .ent(3.0).ex(&["MAILGUN_API_KEY={secret}"]).neg(&["MAILGUN_API_KEY=key-{hex:4}"]),
        tok("mailchimp-api-key", "saas", "Mailchimp API key", &["-us"],
            r"\b([a-f0-9]{32}-us[0-9]{1,2})\b", "{hex:32}-us{digit:1-2}").ent(3.0).neg(&["{hex:20}-us1"]),
        tok("brevo-api-key", "saas", "Brevo (Sendinblue) API key", &["xkeysib-"],
            r"\b(xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16})\b", "xkeysib-{hex:64}-{alnum:16}").ent(3.0).neg(&["xkeysib-{hex:64}"]),
        tok("shopify-access-token", "saas", "Shopify access token", &["shpat_"],
            r"\b(shpat_[a-fA-F0-9]{32})\b", "shpat_{hex:32}").ent(3.0).neg(&["shpat_{hex:16}"]),
        tok("shopify-custom-app-token", "saas", "Shopify custom app access token", &["shpca_"],
            r"\b(shpca_[a-fA-F0-9]{32})\b", "shpca_{hex:32}").ent(3.0).neg(&["shpca_{hex:16}"]),
        tok("shopify-private-app-token", "saas", "Shopify private app access token", &["shppa_"],
            r"\b(shppa_[a-fA-F0-9]{32})\b", "shppa_{hex:32}").ent(3.0).neg(&["shppa_{hex:16}"]),
        tok("shopify-shared-secret", "saas", "Shopify app shared secret", &["shpss_"],
            r"\b(shpss_[a-fA-F0-9]{32})\b", "shpss_{hex:32}").ent(3.0).neg(&["shpss_{hex:16}"]),
        tok("postman-api-key", "saas", "Postman API key", &["PMAK-"],
            r"\b(PMAK-[a-f0-9]{24}-[a-f0-9]{34})\b", "PMAK-{hex:24}-{hex:34}").ent(3.0).neg(&["PMAK-{hex:24}-{hex:10}"]),
        tok("databricks-token", "saas", "Databricks personal access token", &["dapi"],
            r"\b(dapi[a-f0-9]{32}(?:-[0-9])?)\b", "dapi{hex:32}").ent(3.0).neg(&["dapi{hex:16}"]),
        ctx("datadog-api-key", "saas", "Datadog API key", &["datadog", "dd_api_key"], r"datadog[\w.-]{0,20}?api|dd_api_key",
            "[a-f0-9]{32}", r"\b", "{hex:32}").ent(3.0).ex(&["DD_API_KEY={secret}", "datadog_api_key: \"{secret}\""])
            .neg(&["DD_API_KEY={hex:16}"]),
        ctx("datadog-app-key", "saas", "Datadog application key", &["datadog", "dd_app_key"], r"datadog[\w.-]{0,20}?app|dd_app_key",
            "[a-f0-9]{40}", r"\b", "{hex:40}").ent(3.0).ex(&["DD_APP_KEY={secret}"]).neg(&["DD_APP_KEY={hex:20}"]),
        tok("newrelic-user-api-key", "saas", "New Relic user API key", &["NRAK-"],
            r"\b(NRAK-[A-Z0-9]{27})\b", "NRAK-{upalnum:27}").ent(3.5).neg(&["NRAK-{upalnum:10}"]),
        tok("newrelic-browser-api-key", "saas", "New Relic browser API key", &["NRJS-"],
            r"\b(NRJS-[a-f0-9]{19})\b", "NRJS-{hex:19}").ent(3.0).neg(&["NRJS-{hex:10}"]),
        tok("newrelic-insert-key", "saas", "New Relic insights insert key", &["NRII-"],
            &format!(r"\b(NRII-[A-Za-z0-9_-]{{32}}){END_URL}"), "NRII-{b64url:32}").ent(3.5).neg(&["NRII-{b64url:10}"]),
        tok("newrelic-license-key", "saas", "New Relic ingest license key", &["NRAL"],
            r"\b([a-f0-9]{36}NRAL)\b", "{hex:36}NRAL").ent(3.0).neg(&["{hex:20}NRAL"]),
        tok("sentry-user-token", "saas", "Sentry user auth token", &["sntryu_"],
            r"\b(sntryu_[a-f0-9]{64})\b", "sntryu_{hex:64}").ent(3.0).neg(&["sntryu_{hex:20}"]),
        tok("sentry-org-token", "saas", "Sentry organization auth token", &["sntrys_"],
            r"\b(sntrys_eyJ[A-Za-z0-9+/=_]{80,})(?:[^A-Za-z0-9+/=_]|$)", "sntrys_eyJ{b64:150}").max(600).ent(4.0)
            .neg(&["sntrys_eyJ{b64:20}"]),
        tok("grafana-service-account-token", "saas", "Grafana service account token", &["glsa_"],
            r"\b(glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})\b", "glsa_{alnum:32}_{hex:8}").ent(3.5).neg(&["glsa_{alnum:32}"]),
        tok("grafana-cloud-token", "saas", "Grafana Cloud API token", &["glc_"],
            &format!(r"\b(glc_[A-Za-z0-9+/]{{32,}}={{0,2}}){END_B64}"), "glc_{alnum:80}").max(420).ent(4.0).neg(&["glc_{alnum:16}"]),
        ctx("pagerduty-api-key", "saas", "PagerDuty API key", &["pagerduty"], "pagerduty", r"u\+[A-Za-z0-9_+-]{18}",
            r"(?:[^A-Za-z0-9_+-]|$)", "u+{b64url:18}").ent(3.5).ex(&["PAGERDUTY_TOKEN={secret}"]).neg(&["PAGERDUTY_TOKEN=u+{b64url:6}"]),
        tok("atlassian-api-token", "saas", "Atlassian (Jira, Confluence, Bitbucket) API token", &["ATATT3"],
            r"\b(ATATT3[A-Za-z0-9_=-]{180,200})(?:[^A-Za-z0-9_=-]|$)", "ATATT3xFfGF0{b64url:170}={HEX:8}").ent(4.0)
            .neg(&["ATATT3xFfGF0{b64url:40}"]),
        tok("linear-api-key", "saas", "Linear API key", &["lin_api_"],
            r"\b(lin_api_[A-Za-z0-9]{40})\b", "lin_api_{alnum:40}").ent(4.0).neg(&["lin_api_{alnum:20}"]),
        tok("notion-token", "saas", "Notion integration token", &["ntn_"],
            r"\b(ntn_[0-9]{11}[A-Za-z0-9]{35})\b", "ntn_{digit:11}{alnum:35}").ent(3.5).neg(&["ntn_{digit:11}{alnum:10}"]),
        tok("notion-legacy-token", "saas", "Notion integration token (legacy secret_ format)", &["secret_"],
            r"\b(secret_[A-Za-z0-9]{43})\b", "secret_{alnum:43}").ent(4.0).neg(&["secret_{alnum:20}", "secret_key_base_for_the_rails_application_x"]),
        ctx("airtable-pat", "saas", "Airtable personal access token", &["airtable"], "airtable", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}",
            r"\b", "pat{alnum:14}.{hex:64}").ent(3.5).ex(&["AIRTABLE_TOKEN={secret}"]).neg(&["AIRTABLE_TOKEN=patXXXXXXXXXXXXXX.<hex>"]),
        tok("doppler-token", "saas", "Doppler token", &["dp.pt.", "dp.st.", "dp.ct.", "dp.sa.", "dp.scim.", "dp.audit."],
            &format!(r"\b(dp\.(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_-]{{1,40}}\.)?[A-Za-z0-9_-]{{40,44}}){END_URL}"), "dp.pt.{alnum:43}").ent(4.0)
            .neg(&["dp.pt.{alnum:20}"]),
        tok("onepassword-service-account-token", "saas", "1Password service account token", &["ops_eyJ"],
            &format!(r"\b(ops_eyJ[A-Za-z0-9+/]{{250,}}={{0,3}}){END_B64}"), "ops_eyJ{b64:300}").max(1200).ent(4.5)
            .neg(&["ops_eyJ{b64:40}"]),
        tok("onepassword-secret-key", "saas", "1Password account secret key", &["A3-"],
            r"\b(A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5})\b",
            "A3-{upalnum:6}-{upalnum:11}-{upalnum:5}-{upalnum:5}-{upalnum:5}").ent(3.5).neg(&["A3-{upalnum:6}-{upalnum:11}-{upalnum:5}"]),
        ctx("okta-api-token", "saas", "Okta API token", &["okta"], "okta", "00[A-Za-z0-9_-]{40}", END_URL, "00{b64url:40}")
            .ent(4.0).ex(&["OKTA_API_TOKEN={secret}"]).neg(&["OKTA_API_TOKEN=00{b64url:6}"]),
        ctx("auth0-client-secret", "saas", "Auth0 client secret", &["auth0"], "auth0", "[A-Za-z0-9_-]{64}", END_URL, "{b64url:64}")
            .ent(4.0).ex(&["AUTH0_CLIENT_SECRET={secret}"]).neg(&["AUTH0_CLIENT_SECRET=${AUTH0_SECRET}"]),
        tok("hubspot-pat", "saas", "HubSpot private app access token", &["pat-na1-", "pat-eu1-"],
            &format!(r"\b(pat-(?:na|eu)1-{UUID})\b"), "pat-na1-{uuid}").ent(3.0).neg(&["pat-na1-{hex:8}"]),
        tok("contentful-pat", "saas", "Contentful personal access token", &["CFPAT-"],
            &format!(r"\b(CFPAT-[A-Za-z0-9_-]{{43}}){END_URL}"), "CFPAT-{b64url:43}").ent(4.0).neg(&["CFPAT-{b64url:20}"]),
        tok("figma-pat", "saas", "Figma personal access token", &["figd_"],
            &format!(r"\b(figd_[A-Za-z0-9_-]{{40}}){END_URL}"), "figd_{b64url:40}").ent(4.0).neg(&["figd_{b64url:20}"]),
        tok("frameio-token", "saas", "Frame.io API token", &["fio-u-"],
            r"\b(fio-u-[A-Za-z0-9_=-]{64})(?:[^A-Za-z0-9_=-]|$)", "fio-u-{b64url:64}").ent(4.0).neg(&["fio-u-{b64url:20}"]),
        tok("typeform-token", "saas", "Typeform personal access token", &["tfp_"],
            r"\b(tfp_[A-Za-z0-9_.=-]{59})(?:[^A-Za-z0-9_.=-]|$)", "tfp_{b64url:59}").ent(4.0).neg(&["tfp_{b64url:20}"]),
        tok("clickup-token", "saas", "ClickUp personal API token", &["pk_"],
            r"\b(pk_[0-9]{6,10}_[A-Z0-9]{32})\b", "pk_{digit:8}_{upalnum:32}").ent(3.5).neg(&["pk_{digit:8}_{upalnum:10}"]),
        tok("mapbox-secret-token", "saas", "Mapbox secret (sk.) or temporary (tk.) access token", &["sk.eyJ", "tk.eyJ"],
            &format!(r"\b([st]k\.eyJ[A-Za-z0-9_-]{{30,100}}\.[A-Za-z0-9_-]{{22}}){END_URL}"), "sk.eyJ{b64url:60}.{b64url:22}").ent(4.0)
            .neg(&["sk.eyJ{b64url:20}.{b64url:22}"]),
        tok("prefect-api-key", "saas", "Prefect API key", &["pnu_"],
            r"\b(pnu_[A-Za-z0-9]{36})\b", "pnu_{alnum:36}").ent(3.5).neg(&["pnu_{alnum:20}"]),
        tok("pulumi-access-token", "saas", "Pulumi access token", &["pul-"],
            r"\b(pul-[a-f0-9]{40})\b", "pul-{hex:40}").ent(3.0).neg(&["pul-{hex:20}"]),
        tok("readme-api-key", "saas", "ReadMe API key", &["rdme_"],
            r"\b(rdme_[a-z0-9]{70})\b", "rdme_{lowalnum:70}").ent(4.0).neg(&["rdme_{lowalnum:20}"]),
        tok("shippo-api-token", "saas", "Shippo API token", &["shippo_live_", "shippo_test_"],
            r"\b(shippo_(?:live|test)_[a-fA-F0-9]{40})\b", "shippo_live_{hex:40}").ent(3.0).neg(&["shippo_live_{hex:20}"]),
        tok("easypost-api-key", "saas", "EasyPost production (EZAK) or test (EZTK) API key", &["EZAK", "EZTK"],
            r"\b(EZ[AT]K[A-Za-z0-9]{54})\b", "EZAK{alnum:54}").ent(4.0).neg(&["EZAK{alnum:20}"]),
        tok("duffel-api-token", "saas", "Duffel API token", &["duffel_live_", "duffel_test_"],
            r"\b(duffel_(?:live|test)_[A-Za-z0-9_=-]{43})(?:[^A-Za-z0-9_=-]|$)", "duffel_live_{b64url:43}").ent(4.0)
            .neg(&["duffel_live_{b64url:20}"]),
        tok("dropbox-token", "saas", "Dropbox short-lived access token", &["sl."],
            &format!(r"\b(sl\.[A-Za-z0-9_-]{{130,152}}){END_URL}"), "sl.{b64url:140}").ent(4.0).neg(&["sl.{b64url:40}"]),
        ctx("twitter-bearer-token", "saas", "Twitter / X API bearer token", &["twitter"], "twitter",
            "A{21}[A-Za-z0-9%]{30,120}", r"(?:[^A-Za-z0-9%]|$)", "AAAAAAAAAAAAAAAAAAAAA{alnum:80}").no_placeholder_check().ent(3.5)
            .ex(&["TWITTER_BEARER_TOKEN={secret}"]).neg(&["TWITTER_BEARER_TOKEN=AAAAAAAAAAAAAAAAAAAAA"]),
        tok("facebook-access-token", "saas", "Facebook / Meta access token", &["EAAB", "EAAC", "EAAD", "EAAG"],
            r"\b(EAA[BCDG][A-Za-z0-9]{80,250})\b", "EAAG{alnum:150}").ent(4.0).neg(&["EAAG{alnum:30}"]),
        ctx("algolia-admin-key", "saas", "Algolia admin API key", &["algolia"], "algolia", "[a-z0-9]{32}", r"\b", "{hex:32}")
            .ent(3.0).ex(&["ALGOLIA_ADMIN_KEY={secret}"]).neg(&["ALGOLIA_ADMIN_KEY={hex:12}"]),
        ctx("zendesk-api-token", "saas", "Zendesk API token", &["zendesk"], "zendesk", "[A-Za-z0-9]{40}", r"\b", "{alnum:40}")
            .ent(4.0).ex(&["ZENDESK_API_TOKEN={secret}"]).neg(&["ZENDESK_API_TOKEN={alnum:8}"]),
        // --------------------------------------------------------- private keys
        pem("private-key-rsa", "RSA PRIVATE KEY", "RSA private key (PKCS#1 PEM)", 1600),
        pem("private-key-dsa", "DSA PRIVATE KEY", "DSA private key (PEM)", 880),
        pem("private-key-ec", "EC PRIVATE KEY", "EC private key (SEC1 PEM)", 300),
        pem("private-key-openssh", "OPENSSH PRIVATE KEY", "OpenSSH private key", 400),
        pem("private-key-pkcs8", "PRIVATE KEY", "PKCS#8 private key (PEM)", 1620),
        pem("private-key-pkcs8-encrypted", "ENCRYPTED PRIVATE KEY", "Encrypted PKCS#8 private key (PEM)", 1700),
        tok("private-key-pgp", "private-key", "PGP private key block", &["-----BEGIN PGP PRIVATE KEY BLOCK"],
            r"(-----BEGIN PGP PRIVATE KEY BLOCK-----(?:[^-]|-[^-]){64,}?-----END PGP PRIVATE KEY BLOCK-----)",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{pem:2400}\n={b64:4}\n-----END PGP PRIVATE KEY BLOCK-----")
            .max(12 * 1024).ent(4.0).no_placeholder_check()
            .ex(&["{secret}"]).neg(&["-----BEGIN PGP PRIVATE KEY BLOCK-----\n...\n-----END PGP PRIVATE KEY BLOCK-----"]),
        tok("private-key-putty", "private-key", "PuTTY private key file", &["PuTTY-User-Key-File-"],
            r"(PuTTY-User-Key-File-[23]: [A-Za-z0-9@.-]{3,40}\r?\n(?:[^-]|-[^-]){20,}?\nPrivate-MAC: [0-9a-f]{40,64})\b",
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy@build\nPublic-Lines: 2\n{pem:80}\nPrivate-Lines: 1\n{pem:44}\nPrivate-MAC: {hex:64}")
            .max(8 * 1024).ent(4.0).no_placeholder_check()
            .ex(&["{secret}"]).neg(&["PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-MAC: <mac>"]),
        // ------------------------------------------------ tokens and key formats
        tok("jwt", "jwt", "JSON Web Token", &["eyJ"],
            &format!(r"\b(eyJ[A-Za-z0-9_-]{{10,}}\.eyJ[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]{{10,}}){END_URL}"),
            "eyJ{b64url:30}.eyJ{b64url:80}.{b64url:43}").max(4096).ent(4.0)
            .stopwords(&[
                "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
                // `{"k":"value"}`: joserfc's README example, signed with `your-secret-key`.
                "eyJrIjoidmFsdWUifQ",
            ])
            .neg(&["eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
                   "eyJ{b64url:30}.{b64url:20}",
                   "'eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJrIjoidmFsdWUifQ._M8ViO_GK6TnZ9G9eqdlS7IpNWzhoGwaYYDQ3hEwwmA'"]),
        tok("age-secret-key", "private-key", "age encryption secret key", &["AGE-SECRET-KEY-1"],
            r"\b(AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})\b", "AGE-SECRET-KEY-1{BECH32:58}").ent(3.5)
            .neg(&["AGE-SECRET-KEY-1{BECH32:20}"]),
        // ------------------------------------------------ credentials on the wire
        tok("curl-basic-auth", "http-credential", "Password passed to curl with -u/--user user:password", &["curl"],
            r#"\bcurl\b[^\n|;&]{0,200}?\s(?:-u|--user)\s*["']?[^\s:"']{1,64}:([^\s"']{6,128})["']?(?:\s|$)"#,
            "{urlpass:16}").ci().ent(3.0).precision(Precision::Medium)
            .allow_secret(&[URL_PASSWORD_PLACEHOLDERS])
            .ex(&["curl -u deploy:{secret} https://ci.internal.net/api", "curl -s --user 'admin:{secret}' -X POST https://h/"])
            .neg(&["curl -u user:password https://example.com", "curl -u \"$USER:$PASS\" https://h/", "curl -u admin: https://h/"]),
        tok("http-authorization-header", "http-credential", "Credential in an HTTP Authorization header (Basic, Bearer or token)", &["authorization"],
            r#"(?i:authorization)["']?\s{0,4}[:=]\s{0,4}["']?(?i:basic|bearer|token)\s+([A-Za-z0-9+/_.~-]{20,500}={0,2})(?:["'\s;,]|\\[nr]|$)"#,
            "{b64url:40}").ci().ent(3.5).classes(3).prio(-3).precision(Precision::Medium)
            .stopwords(DOCUMENTATION_VALUES)
            .ex(&["Authorization: Bearer {secret}", "-H 'Authorization: Basic {secret}'", "\"authorization\": \"token {secret}\""])
            .neg(&["Authorization: Bearer <token>", "Authorization: Bearer ${TOKEN}", "Authorization: Basic dXNlcjpwYXNzd29yZA==",
                   "Authorization: Bearer YOUR_ACCESS_TOKEN_HERE_12", "Authorization: Basic czZCaGRSa3F0MzpnWDFmQmF0M2JW"]),
        // ------------------------------------------------- URLs with passwords
        url("postgres-url", "PostgreSQL connection URL with a password", &["postgres://", "postgresql://"], "postgres(?:ql)?",
            "postgres://app_user:{secret}@db.internal:5432/app"),
        url("mysql-url", "MySQL connection URL with a password", &["mysql://", "mysqlx://"], "mysqlx?",
            "mysql://root:{secret}@10.1.2.3:3306/shop"),
        url("mongodb-url", "MongoDB connection URL with a password", &["mongodb://", "mongodb+srv://"], r"mongodb(?:\+srv)?",
            "MONGO_URI=mongodb+srv://svc:{secret}@cluster0.abcde.mongodb.net/prod"),
        url("redis-url", "Redis connection URL with a password", &["redis://", "rediss://"], "rediss?",
            "REDIS_URL=redis://default:{secret}@cache.internal:6379/0"),
        url("amqp-url", "AMQP (RabbitMQ) connection URL with a password", &["amqp://", "amqps://"], "amqps?",
            "amqp://worker:{secret}@mq.internal:5672/vhost"),
        tok("url-credential", "url-credential", "Password embedded in a URL (scheme://user:pass@host)", &["://"],
            r#"\b[A-Za-z][A-Za-z0-9+.-]{1,15}://[^:@/\s"'<>]{1,64}:([^:/\s"'<>]{3,128})@[A-Za-z0-9\[_-][A-Za-z0-9._-]{0,62}"#,
            "{urlpass:16}").prio(-5).ent(3.0)
            .allow_secret(&[URL_PASSWORD_PLACEHOLDERS])
            .allow_match(&[URL_EXAMPLE_HOSTS])
            .ex(&["git clone https://deploy:{secret}@git.internal.net/repo.git", "ftp://backup:{secret}@files.internal.net/dumps/",
                  "sftp://ops:{secret}@10.0.4.2:22/upload"])
            .neg(&["https://user:password@example.com/", "ftp://anonymous:guest@ftp.example.org/", "http://joe:${PASS}@host/",
                   "http://user:p%40ss%3Aw0rd@example.com/path", "MultiHostUrl('https://foo.com:123,foo:bar@bar.com/path')",
                   "git clone https://deploy:{urlpass:16}@git.internal.test/repo.git"]),
        // ------------------------------------------------------------- generic
        tok("generic-secret-assignment", "generic", "High-entropy value assigned to a password, secret, token or API key",
            &["passw", "secret", "token", "api_key", "apikey", "api-key", "access_key", "auth_key"],
            r#"(?i:passw(?:or)?d|secret|token|api[_-]?key|access[_-]?key|auth[_-]?key)[\w.-]{0,20}["']?[ \t]{0,4}(?::=|=>|=|:|>)[ \t]{0,4}["'`]?([A-Za-z0-9+/_.~!@#%^*=-]{12,100})(?:["'`\s;,&<]|$)"#,
            // Three classes, always: `GENERIC_FEWER_CLASSES` drops letters-only
            // values (1.5 % of `{alnum:24}`), and chunk_boundaries.rs's
            // planted secrets must be ones the rule reports.
            "{upper:1}{alnum:10}{digit:1}{lower:1}{alnum:11}").ci().prio(-10).ent(3.5).classes(2).precision(Precision::Low)
            .allow_secret(&[GENERIC_FEWER_CLASSES, GENERIC_NOT_SECRET_VALUES, GENERIC_IDENTIFIERS, GENERIC_EXPRESSIONS, GENERIC_NAMED_VALUES, GENERIC_RESOURCE_IDS])
            .allow_match(&[GENERIC_AWS_SECRET_NAMES, GENERIC_FILE_NAME_KEYS])
            .allow_line(&[GENERIC_NOT_SECRET_NAMES])
            .allow_around(&[AWS_DOCUMENTATION_CONTEXT])
            .stopwords(DOCUMENTATION_VALUES)
            .ex(&["db_password = \"{secret}\"", "API_TOKEN={secret}\n", "  client_secret: '{secret}'",
                  "https://api.example.net/v1?token={secret}&page=2", "secret={secret};path=/",
                  "export AUTH_TOKEN='{secret}'", "\"apiKey\": \"{secret}\",", "password := \"{secret}\""])
            .neg(&["password = \"changeme\"", "token = tokenize.generate_tokens(readline)", "SECRET_KEY = \"your-secret-key-here\"",
                   "api_key = \"<YOUR_API_KEY>\"", "password: ${DB_PASSWORD}", "token = \"xxxxxxxxxxxxxxxxxxxx\"",
                   "secret = \"abcdefghijklmnop\"", "password = self._password_manager_value",
                   "tokenize.COMMENT : Colors.LightRed,", "\"NextToken\": \"eyJOZXh0VG9rZW4iOiBudWxsfQ==\"",
                   "\"ClientToken\": \"{uuid}\"", "\"token\": \"ACEGmnoq#1rstu2...BDFH3vxwy!4hlm!#5\"",
                   "\"ARN\": \"arn:aws:secretsmanager:us-west-2:123456789012:secret:MyTestSecret-a1b2c3\",",
                   "\"Resource\":\"arn:aws:secretsmanager:*:*:secret:AmazonSageMaker-*\"",
                   "\"secretsmanager:ResourceTag/RedshiftDataFullAccess\":\"*\"",
                   "if wordToken.type==XPathLexer.WILDCARD :", "keyfile: str, password: _PasswordType | None = None",
                   "\"ChangeToken\": \"12cs345-67cd-890b-1cd2-c3a4567d89f1\"",
                   // The issue's shapes: identifiers, type annotations, expressions.
                   "\"V1Secret\": \".models.v1_secret\"", "MsV1_0ChangePassword: MSV1_0_PROTOCOL_MESSAGE_TYPE",
                   "apiKey: SensitiveString2048;", "out_len = params.shared_secret_len*2;",
                   "Token: TOKEN_KIND_IDENTIFIER_V2", "secret_len = PyBytes_Size(secret_obj)",
                   "password: Option<SecretString2048>", "access_key: AccessKeyId128,",
                   // Documentation values.
                   "api_key = \"sk_test_4eC39HqLyjWDarjtT1zdp7dc\"", "password = \"P@ssw0rd123!\"",
                   "password: \"correcthorsebatterystaple1!\"",
                   "_bindgen_ty_secret: __IncompleteArrayField<u8>,", "Token: DISPID_SpeechObjectTokenCategory,",
                   "password: MI_UsernamePasswordCreds,", "\"ExportToken\": \"export-token-cu4lg26ofcziixny\"",
                   "\"Password\": \"PassWordMustBeAtLeast6Chars.\"", "access_token=\"2YotnFZFEjr1zCsicMWpAA\"",
                   // Self-labelled documentation lines, DNS verification tokens.
                   "--credential \"AccessKeyId=ABCDE12345670EXAMPLE, RawSecretAccessKey={b64:43}=\"",
                   "\"VerificationToken\": \"{b64:43}=\",", "\"CopyProductToken\": \"copyproduct-abc5defgjkdji\"",
                   // AWS documentation markers in neighbouring fields, AWS's documented BGP key.
                   "\"ServiceUserName\": \"sofia-at-123456789012\",\n\"ServicePassword\": \"{b64:43}=\",",
                   "\"ServicePassword\": \"{b64:43}=\",\n\"ServiceSpecificCredentialId\": \"ACCAEXAMPLE123EXAMPLE\",",
                   "\"KeyId\": \"1234abcd-12ab-34cd-56ef-1234567890ab\",\n\"SharedSecret\": \"{b64:64}\",",
                   "<bgp_auth_key>0x123pK5_VBqv.UQ3kJ4123_</bgp_auth_key>"]),
    ]
}

/// The generic rule takes values of three or four character classes (of
/// lower, upper, digit, other) and one kind of two-class value: 32 or more
/// lower-case hex digits, the shape of many API keys and client secrets
/// (`API_KEY = "951bc382db9abad29c68634761dd6e19"`), and one more: 52
/// characters of lower-case base32 (`a-z2-7`), the shape of Azure DevOps
/// personal access tokens. Every other value of fewer than three classes
/// is allowlisted here: letters only, lower-case letters and digits with a
/// letter past `f` (unless base32 of length 52), upper-case letters and
/// digits, no letter, and hex shorter than 32.
const GENERIC_FEWER_CLASSES: &str = r"^(?:[A-Za-z]+|[a-z0-9]*[g-z][a-z0-9]*[0189][a-z0-9]*|[a-z0-9]*[0189][a-z0-9]*[g-z][a-z0-9]*|[a-z2-7]{1,51}|[a-z2-7]{53,}|[A-Z0-9]+|[^A-Z0-9]+|[^a-z0-9]+|[^A-Za-z]+|[a-f0-9]{1,31})$";

/// A key that is a file name (`"src/token.rs": "<sha256>"` in cargo's
/// `.cargo-checksum.json`): the match starts at the keyword, so the key
/// runs on to an extension and a closing quote before the `:`.
const GENERIC_FILE_NAME_KEYS: &str = r#"^[\w-]*\.[A-Za-z][A-Za-z0-9]{0,5}["']\s{0,4}:"#;

/// Values that are code, not credentials: dotted identifier chains
/// (`tokenize.COMMENT`, `self._password_field`), UUIDs (request ids), the
/// tail of a `==` comparison, and type names (`password: _PasswordType`).
const GENERIC_NOT_SECRET_VALUES: &str = r"^(?:=.*|_?[A-Z][A-Za-z]*Type|\.?[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$";
/// AWS Secrets Manager names, not values: the `secret:NAME` part of an ARN
/// and `secretsmanager:ResourceTag/...` policy keys. The match starts at the
/// keyword, so a value glued to `secret:` with no quote or space is an ARN
/// segment (YAML needs a space after the colon, JSON a quote).
const GENERIC_AWS_SECRET_NAMES: &str = r#"^(?i:secret(?:smanager)?):[^\s"'`]"#;
/// Identifiers, not values: ALL_CAPS constants (`MSV1_0_PROTOCOL_MESSAGE_TYPE`),
/// CamelCase type names (`SensitiveString2048`, `AccessKeyId128`) and
/// snake_case names made of words. A random value is almost never built
/// wholly of words of three or more letters.
const GENERIC_IDENTIFIERS: &str = r"^(?:_*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z][A-Z0-9_]{2,}[A-Z]|_*(?:[A-Z][A-Z0-9]*_)*(?:[A-Z][a-z]{2,}|[a-z]{3,})(?:[A-Z][a-z]{2,}|[A-Z]{2,4}|[0-9]+|_[a-z]{2,}|_)*)$";
/// A value that spells the name of what it stands for (`export-token-cu4lg26`,
/// `PassWordMustBeAtLeast6Chars.`, `secret%3Dpassword`) is a label or an
/// encoded key name, not a credential.
const GENERIC_NAMED_VALUES: &str = r"(?i)token|secret|passw";
/// Expressions: a dotted name, an operator and an operand
/// (`params.shared_secret_len*2`), or a name times a number (`key_len*8`).
const GENERIC_EXPRESSIONS: &str =
    r"^(?:[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+[-+*/%][\w.]+|[A-Za-z_][A-Za-z0-9_]*[*/%][0-9]+)$";
/// Values published in documentation and tutorials (ASCII case-insensitive
/// substrings of the secret).
const DOCUMENTATION_VALUES: &[&str] = &[
    "4eC39HqLyjWDarjtT1zdp7dc",
    "correcthorsebatterystaple",
    "p@ssw0rd",
    "passw0rd",
    "hunter2",
    "s3cr3t",
    "supersecret",
    "secret123",
    "password123",
    "letmein",
    "qwerty",
    "mysecret",
    "mypassword",
    "topsecret",
    "foobar",
    // RFC 6749's example access and refresh tokens and client credentials.
    "2YotnFZFEjr1zCsicMWpAA",
    "tGzv3JOkF0XG5Qx2TlKWIA",
    "czZCaGRSa3F0MzpnWDFmQmF0M2JW",
    "gX1fBat3bV",
    // AWS's documented Direct Connect BGP key: awscli's
    // `directconnect/associate-virtual-interface` example gives it as
    // `authKey` three times and inside `customerRouterConfig`'s XML (its
    // other examples put `0x…EXAMPLE` keys in the same place).
    "0x123pK5_VBqv.UQ3kJ4123_",
];

/// Resource ids, not keys: a lower-case kind, `-`, then lower-case letters
/// and digits (`copyproduct-abc5defgjkdji`, `dxvif-fgputw0j`). A random key
/// almost always mixes cases or symbols.
const GENERIC_RESOURCE_IDS: &str = r"^[a-z]{2,24}-[a-z0-9]{6,32}$";

/// Text that labels itself as an example the way AWS's documentation does,
/// within `LINE_CLIP` bytes of the match (the neighbouring fields of a JSON
/// or XML block, not only its line): upper-case `EXAMPLE` ending a word
/// (`AccessKeyId=ABCDE12345670EXAMPLE`, `"ServiceSpecificCredentialId":
/// "ACCAEXAMPLE123EXAMPLE"`), AWS's documentation account id
/// `123456789012` as a whole number (`sofia-at-123456789012`), and its
/// documentation KMS key id `1234abcd-12ab-34cd-56ef-1234567890ab`. Only
/// the generic rule (precision low) honours it.
const AWS_DOCUMENTATION_CONTEXT: &str =
    r"EXAMPLE\b|(?:^|[^0-9])123456789012(?:[^0-9]|$)|1234abcd-12ab-34cd-56ef-1234567890ab";

/// Names of tokens that are not credentials (pagination, idempotency, CSRF,
/// domain verification tokens that are published in DNS).
const GENERIC_NOT_SECRET_NAMES: &str = r"(?i)(?:next|page|continuation|request|client|idempotency|csrf|xsrf|sync|cancel(?:lation)?|change|purchase|verification|refresh_?token_?url)[_-]?token";

/// Hosts reserved for documentation (RFC 2606, RFC 6761): a credential in a
/// URL to `example.com` or `*.test` is an example. (The match ends with the
/// host.)
const URL_EXAMPLE_HOSTS: &str =
    r"@(?:[A-Za-z0-9_-]+\.)*(?:example\.(?:com|net|org)|[A-Za-z0-9_-]+\.(?:example|test|invalid))$";

/// Whole passwords that mark a URL as an example.
const URL_PASSWORD_PLACEHOLDERS: &str = r"^(?i:password|passwd|pass|pwd|secret|admin|root|guest|user|test|demo|postgres|mysql|redis|rabbitmq|mongo|x+|\*+)$";

fn url(id: &str, desc: &str, kws: &[&str], scheme: &str, example: &str) -> B {
    let re = format!(
        r#"\b(?i:{scheme})://[^:@/\s"'<>]{{0,64}}:([^:/\s"'<>]{{3,128}})@[A-Za-z0-9\[_-][A-Za-z0-9._-]{{0,62}}"#
    );
    let first = kws[0];
    base(id, "url-credential", desc, kws, re, "{urlpass:16}")
        .ci()
        .precision(Precision::Medium)
        .ent(2.5)
        .allow_secret(&[URL_PASSWORD_PLACEHOLDERS])
        .allow_match(&[URL_EXAMPLE_HOSTS])
        .ex(&[example])
        .neg(&[
            &format!("{first}user:password@localhost/db"),
            &format!("{first}app:${{DB_PASSWORD}}@db:5432/app"),
            &format!("{first}user:<password>@host/db"),
            &format!("{first}localhost:5432/db"),
            &format!("{first}app:{{urlpass:16}}@db.example.com:5432/app"),
        ])
}

pub(super) fn specs() -> Vec<RuleSpec> {
    table()
        .into_iter()
        .chain(services::table())
        .chain(formats::table())
        .map(|mut b| {
            b.spec.source = "built-in".into();
            b.spec
        })
        .collect()
}
