//! Built-in rules of the recall round (issue 12, branch `recall`): formats
//! that kingfisher's published examples showed magpie missing, written
//! from each vendor's documented token layout (or, where the vendor
//! documents none, the layout the credential evidently has). Like the rest
//! of `builtin/`, no regex here is copied from another scanner.
//!
//! Each rule is either self-identifying (a prefix or a fixed structure:
//! [`tok`]) or found by a key name that names the service (precision
//! `medium`).

use super::super::spec::Precision;
use super::{tok, B, END_B64, END_URL, UUID};

#[rustfmt::skip]
pub(super) fn table() -> Vec<B> {
    vec![
        // ------------------------------------------------------ Azure
        // App Configuration: `Endpoint=https://<store>.azconfig.io;Id=<id>;Secret=<base64>`.
        tok("azure-app-configuration-connection-string", "cloud",
            "Azure App Configuration connection string (Endpoint=…azconfig.io;Id=…;Secret=…)", &[".azconfig.io"],
            &format!(r"(?i:\.azconfig\.io);Id=[^;\s]{{4,64}};Secret=([A-Za-z0-9+/]{{40,88}}={{0,2}}){END_B64}"),
            "{b64:43}=").ci().ent(4.0)
            .ex(&["Endpoint=https://appcs-prod.azconfig.io;Id=Xk2P-l0-s0:{b64:20};Secret={secret}",
                  "\"ConnectionString\": \"Endpoint=https://cfg01.azconfig.io;Id=0-l4-s0:{alnum:20};Secret={secret}\""])
            .neg(&["Endpoint=https://appcs-prod.azconfig.io;Id=<id>;Secret=<secret>",
                   "Endpoint=https://appcs-prod.azconfig.io;Id=Xk2P-l0-s0:{b64:20};Secret={b64:10}="]),
        // IoT Hub, Event Hubs, Service Bus and Relay shared access policies:
        // `…;SharedAccessKeyName=<policy>;SharedAccessKey=<base64 of 32 bytes>`.
        tok("azure-shared-access-key", "cloud",
            "Azure shared access key (IoT Hub, Event Hubs, Service Bus connection string)", &["sharedaccesskey="],
            &format!(r"(?i:SharedAccessKey)=([A-Za-z0-9+/]{{42,43}}=){END_B64}"), "{b64:43}=").ci().ent(4.0)
            .ex(&["HostName=hub01.azure-devices.net;SharedAccessKeyName=iothubowner;SharedAccessKey={secret}",
                  "Endpoint=sb://ns01.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={secret}"])
            .neg(&["Endpoint=sb://ns01.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=<key>",
                   "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={b64:20}="]),
        // ------------------------------------------------------ Grafana
        // Legacy API keys: base64 of `{"k":"…","n":"…","id":N}`, so they
        // begin with `eyJrIjoi`.
        tok("grafana-api-key", "saas", "Grafana API key (legacy, base64 of {\"k\":…})", &["eyJrIjoi"],
            &format!(r"\b(eyJrIjoi[A-Za-z0-9+/]{{40,400}}={{0,2}}){END_B64}"), "eyJrIjoi{b64:60}").max(420).ent(4.0)
            .ex(&["{secret}", "Authorization: Bearer {secret}", "client = GrafanaClient(\"{secret}\", host=h)"])
            .neg(&["eyJrIjoi{b64:12}"]),
        // ------------------------------------------------------ CI and code hosting
        // Jenkins API tokens: `11` and 32 hex digits (32 hex digits before 2.129).
        tok("jenkins-api-token", "source-ci", "Jenkins API token by the service's name", &["jenkins"],
            r#"(?i:jenkins)[\w.-]{0,20}?(?i:token|passw(?:or)?d|pass|api[_-]?key|secret)["']?\s{0,4}(?::=|=>|=|:)\s{0,4}["']?((?:11)?[a-f0-9]{32})\b"#,
            "11{hex:32}").ci().ent(3.0).precision(Precision::Medium)
            .ex(&["JENKINS_TOKEN={secret}", "jenkins_passwd = '{secret}'", "export JENKINS_API_KEY=\"{secret}\""])
            .neg(&["JENKINS_TOKEN={hex:16}", "JENKINS_TOKEN=${JENKINS_TOKEN}"]),
        // SonarQube / SonarCloud tokens before the sqp_/squ_/sqa_ prefixes: 40 hex digits.
        tok("sonarqube-legacy-token", "source-ci", "SonarQube / SonarCloud token (40 hex digits, before the sq*_ prefixes) by its setting's name", &["sonar"],
            r#"(?i:sonar)[\w.-]{0,12}?(?i:login|token)["']?\s{0,4}(?::=|=>|=|:|,)\s{0,4}["']?([a-f0-9]{40})\b"#,
            "{hex:40}").ci().ent(3.0).precision(Precision::Medium)
            .ex(&["sonar.login={secret}", "mvn sonar:sonar -Dsonar.login={secret}", "SONAR_TOKEN: \"{secret}\"",
                  "$sonarLogin = \"{secret}\""])
            .neg(&["sonar.login={hex:20}", "sonar.login=${SONAR_TOKEN}"]),
        // npm tokens before the npm_ prefix (2021) were UUIDs, kept in
        // .npmrc as `_authToken=`.
        tok("npm-legacy-token", "source-ci", "npm access token, legacy UUID form (.npmrc _authToken, NPM_TOKEN)", &["_authtoken", "npm_token", "npmtoken"],
            &format!(r#"(?i:_authToken|npm[_-]?token)["']?\s{{0,4}}(?::=|=|:)\s{{0,4}}["']?({UUID})\b"#),
            "{uuid}").ci().ent(3.0).precision(Precision::Medium)
            .ex(&["//registry.npmjs.org/:_authToken={secret}", "\"_authToken\": \"{secret}\"", "export NPM_TOKEN=\"{secret}\""])
            .neg(&["//registry.npmjs.org/:_authToken=${NPM_TOKEN}", "NPM_TOKEN=00000000-0000-0000-0000-000000000000"]),
        // ------------------------------------------------------ MongoDB Atlas
        tok("mongodb-atlas-service-account-secret", "cloud", "MongoDB Atlas service account client secret (mdb_sa_sk_)", &["mdb_sa_sk_"],
            &format!(r"\b(mdb_sa_sk_[A-Za-z0-9_-]{{40}}){END_URL}"), "mdb_sa_sk_{b64url:40}").ent(3.5)
            .neg(&["mdb_sa_sk_{b64url:12}"]),
        tok("mongodb-atlas-api-private-key", "cloud", "MongoDB Atlas programmatic API private key by its setting's name", &["atlas", "mongodb"],
            &format!(r#"(?i:atlas|mongodb)[\w.-]{{0,20}}?(?i:private)[_-]?(?i:key)["']?\s{{0,4}}(?::=|=>|=|:)\s{{0,4}}["']?({UUID})\b"#),
            "{uuid}").ci().ent(3.0).precision(Precision::Medium)
            .ex(&["ATLAS_PRIVATE_KEY={secret}", "mongodbatlas_private_key = \"{secret}\""])
            .neg(&["ATLAS_PRIVATE_KEY=<private-key>", "ATLAS_PRIVATE_KEY={hex:8}"]),
        // Code Climate's test reporter id (64 hex digits), used to upload coverage.
        tok("codeclimate-test-reporter-id", "source-ci", "Code Climate test reporter id (CC_TEST_REPORTER_ID)", &["cc_test_reporter_id"],
            r#"(?i:CC_TEST_REPORTER_ID)["']?\s{0,4}(?::=|=>|=|:)\s{0,4}["']?([a-f0-9]{64})\b"#, "{hex:64}").ci().ent(3.0)
            .precision(Precision::Medium)
            .ex(&["env:\n  CC_TEST_REPORTER_ID: {secret}\n", "export CC_TEST_REPORTER_ID={secret}"])
            .neg(&["CC_TEST_REPORTER_ID: ${{ secrets.CC_TEST_REPORTER_ID }}", "CC_TEST_REPORTER_ID: {hex:32}"]),
        // NuGet keys by the service's name when they lack the oy2 prefix.
        tok("nuget-api-key-by-name", "source-ci", "NuGet API key by the service's name (46 lower-case letters and digits)", &["nuget"],
            r#"(?i:nuget)[\w.-]{0,20}?(?:[ \t]{1,3}(?i:api[ _-]?key|key|secret|token))?["']?[ \t]{0,4}(?::=|=>|=|:|[ \t])[ \t]{0,4}["']?([a-z0-9]{46})\b"#,
            "{lowalnum:46}").ci().ent(3.5).prio(-1).precision(Precision::Medium)
            .ex(&["nuget key = {secret}", "NUGET_API_KEY: \"{secret}\"", "nuget secret {secret}"])
            .neg(&["nuget key = {lowalnum:20}", "NUGET_API_KEY: ${NUGET_API_KEY}"]),
        // ------------------------------------------------------ private keys
        // A PEM private key, base64-encoded as a whole (an environment
        // variable or a JSON field): `-----BEGIN ` encodes as
        // `LS0tLS1CRUdJTi`, and `PRIVATE KEY` in one of its three
        // alignments follows within the label.
        tok("private-key-base64-pem", "private-key", "PEM private key, base64-encoded as a whole (LS0tLS1CRUdJTi…)", &["LS0tLS1CRUdJTi"],
            &format!(r"\b(LS0tLS1CRUdJTi[A-Za-z0-9+/]{{0,24}}?(?:UFJJVkFURSBLRVk|UklWQVRFIEtFWS|QUklWQVRFIEtFWS|BSSVZBVEUgS0VZ)[A-Za-z0-9+/]{{64,8000}}={{0,2}}){END_B64}"),
            "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB{b64:400}").max(8200).ent(4.0).no_placeholder_check()
            .ex(&["{secret}", "PRIVATE_KEY_B64={secret}", "\"privateKey\": \"{secret}\""])
            .neg(&["LS0tLS1CRUdJTiBQVUJMSUMgS0VZLS0tLS0K{b64:400}", "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ=="]),
        // ------------------------------------------------------ SaaS by name
        // Beamer product keys: `b_` and 44 letters and digits.
        tok("beamer-api-key", "saas", "Beamer API key (b_…) by the service's name", &["beamer"],
            r#"(?i:beamer)[\w.-]{0,20}?["']?\s{0,4}(?::=|=>|=|:)\s{0,4}["']?(b_[A-Za-z0-9_-]{40,48})\b"#,
            "b_{alnum:44}").ci().ent(3.5).precision(Precision::Medium)
            .ex(&["BEAMER_KEY = '{secret}'", "beamer = {secret}"])
            .neg(&["BEAMER_KEY = 'b_{alnum:12}'", "\\usetheme{beamer} b_{alnum:44}"]),
        // Datadog keys written `dd-apikey-<hex>` or `datadog-secrettoken-<hex>`.
        tok("datadog-key-by-name", "saas", "Datadog API or application key after a Datadog key name joined by - or _", &["datadog", "dd-api", "dd_api", "dd-app", "dd_app", "dd-secret", "dd_secret"],
            r#"(?i:datadog|dd)[_-](?i:api[_-]?key|apikey|app[_-]?key|appkey|secret[_-]?(?:key|token)|secrettoken)["']?(?:\s{0,4}(?::=|=>|=|:)\s{0,4}["']?|-)([a-f0-9]{32}|[a-f0-9]{40})\b"#,
            "{hex:32}").ci().ent(3.0).prio(-1).precision(Precision::Medium)
            .ex(&["dd-apikey-{secret}", "datadog-secrettoken-{secret}", "DD_SECRET_KEY={secret}"])
            .neg(&["dd-apikey-{hex:16}", "DD_API_KEY=${DD_API_KEY}"]),
        // Facebook (Meta) app secrets: 32 hex digits.
        tok("facebook-app-secret", "saas", "Facebook (Meta) app secret or key by a Facebook key name", &["facebook", "fbapikey", "fb_api_key", "fbappsecret", "fb_app_secret", "fbsecret", "fb_secret"],
            r#"(?i:facebook|fb)[\w.-]{0,20}?(?i:key|secret)["']?\s{0,4}(?::=|=>|=|:)\s{0,16}["']?([a-f0-9]{32})\b"#,
            "{hex:32}").ci().ent(3.0).prio(-1).precision(Precision::Medium)
            .ex(&["config.facebook.key = \"{secret}\"", "fbApiKey:            \"{secret}\",", "FACEBOOK_APP_SECRET={secret}"])
            .neg(&["FACEBOOK_APP_SECRET={hex:16}", "fb_secret = os.environ['FB_SECRET']"]),
        // Atlassian API tokens before the ATATT3 prefix: 24 letters and digits.
        tok("atlassian-legacy-api-token", "saas", "Atlassian (Jira, Confluence) API token, 24-character legacy form, by the service's name", &["atlassian", "confluence"],
            r#"(?i:atlassian|confluence)[\w.-]{0,20}?(?i:key|token|secret|pass\w{0,6})["']?\s{0,4}(?::=|=>|=|:)\s{0,4}["']?([A-Za-z0-9]{24})\b"#,
            "{alnum:24}").ci().ent(3.5).classes(2).precision(Precision::Medium)
            .ex(&["Atlassian_key = \"{secret}\"", "CONFLUENCE_API_TOKEN={secret}"])
            .neg(&["ATLASSIAN_TOKEN=atlassianapitokenvalue", "CONFLUENCE_API_TOKEN={alnum:10}"]),
        // ThingsBoard device provisioning credentials (JSON request body).
        tok("thingsboard-provision-secret", "saas", "ThingsBoard device provisioning secret", &["provisiondevicesecret"],
            r#"(?i:provisionDeviceSecret)["']?\s{0,4}:\s{0,4}["']([A-Za-z0-9]{16,40})["']"#,
            "{lowalnum:20}").ci().ent(3.0).precision(Precision::Medium)
            .ex(&["{\"deviceName\": \"D1\", \"provisionDeviceKey\": \"{lowalnum:20}\", \"provisionDeviceSecret\": \"{secret}\"}"])
            .neg(&["{\"provisionDeviceSecret\": \"<secret>\"}", "{\"provisionDeviceSecret\": \"{lowalnum:8}\"}"]),
        // ------------------------------------------------------ media
        tok("shutterstock-oauth-token", "saas", "Shutterstock OAuth access token (v2/…) by the service's name", &["shutterstock"],
            &format!(r#"(?i:shutterstock)[\w.-]{{0,30}}?["']?\s{{0,4}}(?::=|=>|=|:)\s{{0,4}}["']?(v2/[A-Za-z0-9+/]{{60,400}}={{0,2}}){END_B64}"#),
            "v2/{b64:200}").ci().max(480).ent(4.0).precision(Precision::Medium)
            .ex(&["SHUTTERSTOCK_TOKEN={secret}", "shutterstock_token = \"{secret}\""])
            .neg(&["SHUTTERSTOCK_TOKEN=v2/{b64:8}"]),
    ]
}
