//! Hostile repositories: tree entries named `..` or like absolute paths, a
//! blob over `--max-file-size`, a corrupt loose object and a corrupt pack
//! entry, a submodule, symbolic links. Each is named (a finding at the raw
//! path, or a skip with its reason) and the rest of the history is still
//! scanned; nothing is read outside the repository. The fixtures are made
//! with the `git` binary; the scanner reads them with gix.

#[path = "e2e_common/mod.rs"]
mod common;

#[path = "git_common/mod.rs"]
mod gitc;

use std::path::Path;

use common::{github_token, tempdir, Run};
use gitc::{commit_file, git, git_with_input, init, loose_object, paths_and_secrets, scan_git};
use serde_json::Value;

fn skipped(run: &Run) -> Vec<Value> {
    run.json()["skipped"].as_array().unwrap().clone()
}

/// A raw tree object: `(mode, name, id)` entries, written as git stores
/// them, without git's checks on names (`hash-object --literally`).
fn raw_tree(dir: &Path, entries: &[(&str, &[u8], String)]) -> String {
    let mut bytes = Vec::new();
    for (mode, name, id) in entries {
        bytes.extend_from_slice(mode.as_bytes());
        bytes.push(b' ');
        bytes.extend_from_slice(name);
        bytes.push(0);
        for i in 0..20 {
            bytes.push(u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap());
        }
    }
    git_with_input(
        dir,
        &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
        &bytes,
    )
}

fn blob(dir: &Path, data: &str) -> String {
    git_with_input(dir, &["hash-object", "-w", "--stdin"], data.as_bytes())
}

#[test]
fn dot_dot_and_absolute_looking_tree_names_are_reported_raw_and_never_opened() {
    let t = tempdir();
    let repo = t.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    init(&repo);
    let (up, abs) = (github_token(60), github_token(61));
    let up_body = format!("T={up}\n");
    let abs_body = format!("T={abs}\n");
    // The same bytes outside the repository, where the names point: were
    // they opened (to compare with the work tree), the history findings
    // would be dropped as copies.
    common::put(t.path(), "x.env", up_body.as_bytes());
    let outside = t.path().join("outside.env");
    std::fs::write(&outside, &abs_body).unwrap();
    let sub = raw_tree(&repo, &[("100644", &b"x.env"[..], blob(&repo, &up_body))]);
    let abs_name = outside.to_str().unwrap().as_bytes();
    let root = raw_tree(
        &repo,
        &[
            ("40000", &b".."[..], sub),
            ("100644", abs_name, blob(&repo, &abs_body)),
        ],
    );
    let commit = git(&repo, &["commit-tree", &root, "-m", "hostile names"]);
    git(&repo, &["update-ref", "refs/heads/main", &commit]);
    let mut want = vec![
        ("../x.env".to_owned(), up),
        (outside.to_str().unwrap().to_owned(), abs),
    ];
    want.sort();
    let run = scan_git(&repo, &["-f", "json"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(paths_and_secrets(&run), want);
    // `scan DIR`: the walk finds nothing in the empty work tree, and the
    // history's findings are kept (not compared with files outside).
    let dir_run = common::scan_in(&repo, ["-f", "json", "."]);
    assert_eq!(dir_run.code, Some(1), "{}", dir_run.stderr);
    assert_eq!(paths_and_secrets(&dir_run), want);
}

#[test]
fn a_blob_over_max_file_size_is_named_as_skipped_and_not_inflated() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    // 3 MiB of text, one line per 64 bytes.
    let line = format!("{:063}\n", 7);
    let big = line.repeat(3 << 20 >> 6);
    commit_file(dir, "big.log", &big, "big");
    let token = github_token(62);
    commit_file(dir, "k.env", &format!("T={token}\n"), "small");
    let run = scan_git(dir, &["-f", "json", "--metrics", "--max-filesize", "1M"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(paths_and_secrets(&run), vec![("k.env".to_owned(), token)]);
    let s = skipped(&run);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0]["path"], "big.log");
    assert_eq!(s[0]["reason"], "too_large");
    assert!(
        s[0]["message"].as_str().unwrap().contains("blob "),
        "named by its id: {s:?}"
    );
    // Its size came from the object header: none of its bytes was fetched.
    let fetched = common::metric(&run.summary(), "bytes_fetched");
    assert!(fetched < 1 << 20, "{fetched} bytes fetched");
    common::assert_accounting(&run.summary());
}

/// Commits a victim file (2 KiB of varied text, so it is stored whole and
/// compressed, not as a delta) and a token; returns (victim blob, token).
fn victim_and_token(dir: &Path, n: u32) -> (String, String) {
    init(dir);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(n);
    let mut text = String::new();
    while text.len() < 2048 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text.push_str(&format!("{x:016x} "));
    }
    commit_file(dir, "victim.txt", &text, "victim");
    let token = github_token(n);
    commit_file(dir, "k.env", &format!("T={token}\n"), "secret");
    (git(dir, &["rev-parse", "HEAD:victim.txt"]), token)
}

fn assert_partial_with_victim_named(run: &Run, victim: &str, token: &str) {
    assert_eq!(run.code, Some(2), "partial: {}", run.stderr);
    assert!(run.stderr.contains("scanned partially"), "{}", run.stderr);
    assert_eq!(
        paths_and_secrets(run),
        vec![("k.env".to_owned(), token.to_owned())]
    );
    let s = skipped(run);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0]["path"], "victim.txt");
    assert_eq!(s[0]["reason"], "unreadable");
    assert!(
        s[0]["message"].as_str().unwrap().contains(victim),
        "names the object: {s:?}"
    );
}

#[test]
fn a_truncated_loose_object_is_named_and_the_rest_is_scanned_with_exit_2() {
    let t = tempdir();
    let dir = t.path();
    let (victim, token) = victim_and_token(dir, 63);
    let file = loose_object(dir, &victim);
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 3]).unwrap();
    let run = scan_git(dir, &["-f", "json"]);
    assert_partial_with_victim_named(&run, &victim, &token);
}

#[test]
fn a_corrupt_entry_in_a_pack_is_named_and_the_rest_is_scanned_with_exit_2() {
    let t = tempdir();
    let dir = t.path();
    let (victim, token) = victim_and_token(dir, 64);
    git(dir, &["repack", "-a", "-d", "-q"]);
    git(dir, &["prune-packed"]);
    let packs: Vec<_> = std::fs::read_dir(dir.join(".git/objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .collect();
    assert_eq!(packs.len(), 1, "{packs:?}");
    let idx = packs[0].with_extension("idx");
    let listing = git(dir, &["verify-pack", "-v", idx.to_str().unwrap()]);
    // `<id> blob <size> <size in pack> <offset>`
    let row: Vec<&str> = listing
        .lines()
        .find(|l| l.starts_with(&victim))
        .expect("the victim is in the pack")
        .split_whitespace()
        .collect();
    assert_eq!(row[1], "blob", "{row:?}");
    assert_eq!(row.len(), 5, "stored whole, not as a delta: {row:?}");
    let (in_pack, offset): (usize, usize) = (row[3].parse().unwrap(), row[4].parse().unwrap());
    let mut pack = std::fs::read(&packs[0]).unwrap();
    // Past the entry header and the zlib header: the deflate stream.
    for b in &mut pack[offset + 4..offset + in_pack - 4] {
        *b = 0xff;
    }
    let mut perms = std::fs::metadata(&packs[0]).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&packs[0], perms).unwrap();
    std::fs::write(&packs[0], &pack).unwrap();
    let run = scan_git(dir, &["-f", "json"]);
    assert_partial_with_victim_named(&run, &victim, &token);
}

#[test]
fn a_submodule_is_named_as_skipped_and_is_not_partial() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let first = commit_file(dir, "README.md", "hi\n", "first");
    let token = github_token(65);
    common::put(dir, "k.env", format!("T={token}\n").as_bytes());
    git(dir, &["add", "k.env"]);
    let cacheinfo = format!("160000,{first},vendor/lib");
    git(dir, &["update-index", "--add", "--cacheinfo", &cacheinfo]);
    git(dir, &["commit", "-q", "-m", "submodule"]);
    let run = scan_git(dir, &["-f", "json"]);
    assert_eq!(run.code, Some(1), "not partial: {}", run.stderr);
    assert_eq!(paths_and_secrets(&run), vec![("k.env".to_owned(), token)]);
    let s = skipped(&run);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0]["path"], "vendor/lib");
    assert_eq!(s[0]["reason"], "special_file");
    let msg = s[0]["message"].as_str().unwrap();
    assert!(msg.contains("submodule") && msg.contains(&first), "{msg}");
}

#[test]
fn a_symlink_is_scanned_as_its_target_text_and_never_followed() {
    let t = tempdir();
    let repo = t.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    init(&repo);
    // A link whose target text is a token (dangling), and a link to a file
    // outside the repository that holds another token.
    let in_text = github_token(66);
    let outside_token = github_token(67);
    let outside = t.path().join("outside.env");
    std::fs::write(&outside, format!("T={outside_token}\n")).unwrap();
    std::os::unix::fs::symlink(&in_text, repo.join("tok-link")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join("out-link")).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "links"]);
    let run = scan_git(&repo, &["-f", "json"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(
        paths_and_secrets(&run),
        vec![("tok-link".to_owned(), in_text.clone())]
    );
    assert_eq!(run.summary()["files_scanned"], 2, "both links read as text");
    // `scan DIR`: the walk does not follow links; the history finding is
    // kept (a link in the work tree is never taken for the same content).
    let dir_run = common::scan_in(&repo, ["-f", "json", "."]);
    assert_eq!(dir_run.code, Some(1), "{}", dir_run.stderr);
    assert_eq!(
        paths_and_secrets(&dir_run),
        vec![("tok-link".to_owned(), in_text)]
    );
}

/// The SHA-256 of `data`, 64 lowercase hex digits (`sha256sum`, as git-lfs
/// names its objects; the scanner does not check it).
fn sha256_hex(data: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

/// Writes a Git LFS pointer to `object` at `rel` (what `git lfs track`
/// commits) and, when `fetched`, the object into the local LFS store, as
/// `git lfs fetch` does. Returns the object's id.
fn lfs_pointer(dir: &Path, rel: &str, object: &[u8], fetched: bool) -> String {
    let oid = sha256_hex(object);
    let pointer = format!(
        "version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {}\n",
        object.len()
    );
    common::put(dir, rel, pointer.as_bytes());
    if fetched {
        let store = format!(".git/lfs/objects/{}/{}/{oid}", &oid[..2], &oid[2..4]);
        common::put(dir, &store, object);
    }
    oid
}

#[test]
fn a_git_lfs_pointer_is_read_as_its_fetched_object_or_named_when_not_fetched() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    commit_file(dir, "README.md", "hi\n", "first");
    let (fetched, missing) = (github_token(68), github_token(69));
    lfs_pointer(dir, "model.env", format!("T={fetched}\n").as_bytes(), true);
    let oid = lfs_pointer(dir, "data.env", format!("T={missing}\n").as_bytes(), false);
    let commit = commit_file(dir, ".gitattributes", "*.env filter=lfs\n", "lfs files");
    let run = scan_git(dir, &["-f", "json"]);
    assert_eq!(run.code, Some(1), "findings, not partial: {}", run.stderr);
    assert_eq!(
        paths_and_secrets(&run),
        vec![("model.env".to_owned(), fetched.clone())]
    );
    assert_eq!(run.json()["findings"][0]["commit"], commit.as_str());
    let s = skipped(&run);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0]["path"], "data.env");
    assert_eq!(s[0]["reason"], "lfs_object_missing");
    let msg = s[0]["message"].as_str().unwrap();
    assert!(msg.contains(&oid) && msg.contains("git lfs fetch"), "{msg}");
    // A gate that must not pass on a partial scan.
    let strict = scan_git(dir, &["-f", "json", "--fail-on-skip"]);
    assert_eq!(strict.code, Some(2), "{}", strict.stderr);

    // `scan DIR`: the work tree holds the pointer text (no smudge filter
    // ran), which says nothing of the secret: the history finding stays.
    let dir_run = common::scan_in(dir, ["-f", "json", "."]);
    assert_eq!(dir_run.code, Some(1), "{}", dir_run.stderr);
    assert_eq!(
        paths_and_secrets(&dir_run),
        vec![("model.env".to_owned(), fetched.clone())]
    );
    assert_eq!(dir_run.json()["findings"][0]["commit"], commit.as_str());
    // A checked-out (smudged) file is the object itself: reported once,
    // from the work tree.
    common::put(dir, "model.env", format!("T={fetched}\n").as_bytes());
    let dir_run = common::scan_in(dir, ["-f", "json", "."]);
    assert_eq!(
        paths_and_secrets(&dir_run),
        vec![("model.env".to_owned(), fetched)]
    );
    assert!(
        dir_run.json()["findings"][0]["commit"].is_null(),
        "{:?}",
        dir_run.json()
    );
}

#[test]
fn a_git_lfs_object_of_the_wrong_size_is_named_unreadable() {
    let t = tempdir();
    let dir = t.path();
    init(dir);
    let token = github_token(70);
    let oid = lfs_pointer(dir, "cut.env", format!("T={token}\n").as_bytes(), true);
    commit_file(dir, "README.md", "hi\n", "first");
    // An interrupted download: the object is shorter than its pointer says.
    let store = dir.join(format!(
        ".git/lfs/objects/{}/{}/{oid}",
        &oid[..2],
        &oid[2..4]
    ));
    std::fs::write(&store, b"T=").unwrap();
    let run = scan_git(dir, &["-f", "json"]);
    // Like any unreadable blob of a history: named, and the run is partial.
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(paths_and_secrets(&run).is_empty(), "{}", run.stderr);
    let s = skipped(&run);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(
        (&s[0]["path"], &s[0]["reason"]),
        (&"cut.env".into(), &"unreadable".into())
    );
    assert!(
        s[0]["message"].as_str().unwrap().contains("its pointer"),
        "{s:?}"
    );
}
