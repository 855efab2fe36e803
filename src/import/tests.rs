use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/imports")
        .join(name)
}

fn temp(name: &str, bytes: &[u8]) -> (tempfile_dir::Dir, PathBuf) {
    let dir = tempfile_dir::Dir::new();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write");
    (dir, path)
}

/// A directory removed when dropped; no crate needed for it.
mod tempfile_dir {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new() -> Self {
            static N: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "spyglass-import-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&path).expect("temp dir");
            Self(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn every_fixture_is_told_by_content_not_extension() {
    for (name, format) in [
        ("pytest.xml", Format::Junit),
        ("promptfoo.json", Format::Promptfoo),
        ("inspect.json", Format::InspectJson),
        ("inspect.eval", Format::InspectEval),
    ] {
        let bytes = std::fs::read(fixture(name)).expect("fixture");
        let (_dir, path) = temp("results.txt", &bytes);
        let imported = import_file(&path, None).expect(name);
        assert_eq!(imported.format, format, "{name}");
        assert!(
            imported.run_id.starts_with(format.tag()),
            "{}",
            imported.run_id
        );
        assert!(
            imported
                .results
                .iter()
                .all(|r| r.run_id.as_ref() == Some(&imported.run_id))
        );
    }
}

#[test]
fn run_time_comes_from_the_file() {
    let imported = import_file(&fixture("pytest.xml"), Some("ci")).expect("import");
    assert_eq!(imported.ts, "2026-11-23T20:21:10.452084Z");
    assert_eq!(
        imported.run_id,
        format!("junit-20261123T202110-{}", &imported.run_id[22..])
    );
    assert!(imported.results.iter().all(|r| r.suite == "ci"));
    let frames = imported.frames(7);
    assert_eq!(frames.len(), 6);
    assert_eq!(frames[0].seq, 7);
    assert_eq!(frames[0].ts, imported.ts);
    let again = import_file(&fixture("pytest.xml"), Some("ci")).expect("import");
    assert_eq!(
        again.run_id, imported.run_id,
        "the same file is the same run"
    );
}

#[test]
fn unknown_files_name_the_file_and_what_was_expected() {
    for (bytes, what) in [
        (&b""[..], "the file is empty"),
        (b"name = \"suite\"\n[[cases]]\n", "neither XML nor JSON"),
        (b"<html><body/></html>", "<html>"),
        (b"{\"suite\": \"x\", \"cases\": []}", "neither promptfoo"),
        (b"[1,2]", "JSON array"),
        (b"\xff\xfe\x00junk", "not UTF-8"),
    ] {
        let (_dir, path) = temp("weird.json", bytes);
        let err = import_file(&path, None).expect_err("unknown");
        let text = err.to_string();
        assert!(matches!(err, ImportError::Unknown { .. }), "{text}");
        assert!(text.contains("weird.json"), "{text}");
        assert!(text.contains(what), "{text}");
        assert!(text.contains("expected JUnit XML"), "{text}");
    }
}

#[test]
fn a_zip_that_is_not_an_inspect_log_is_damaged_not_a_panic() {
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    out.start_file("readme.txt", zip::write::SimpleFileOptions::default())
        .expect("start");
    let bytes = out.finish().expect("finish").into_inner();
    let (_dir, path) = temp("a.zip", &bytes);
    let text = import_file(&path, None)
        .expect_err("not inspect")
        .to_string();
    assert!(text.contains("without `header.json`"), "{text}");
}

#[test]
fn a_huge_file_is_refused_before_it_is_read() {
    let dir = tempfile_dir::Dir::new();
    let path = dir.path().join("huge.xml");
    let file = std::fs::File::create(&path).expect("create");
    // Sparse: a 1 GiB file that takes no disk.
    file.set_len(1 << 30).expect("set_len");
    let err = import_file(&path, None).expect_err("huge");
    assert!(matches!(err, ImportError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("huge.xml"), "{err}");
}

#[test]
fn strings_are_sanitised_before_anything_shows_them() {
    let text = "<testsuite name=\"s\x1b]0;pwn\x07\" tests=\"1\" failures=\"1\">\
                <testcase name=\"c&#x1b;[2J\"><failure message=\"bad&#x202e;txt\">line\x1b[31m</failure></testcase></testsuite>";
    let (_dir, path) = temp("evil.xml", text.as_bytes());
    let imported = import_file(&path, None).expect("import");
    let result = &imported.results[0];
    for s in [
        &result.suite,
        &result.case,
        result.reason.as_ref().expect("reason"),
    ] {
        assert!(
            !s.chars()
                .any(|c| c == '\x1b' || c == '\x07' || c == '\u{202e}'),
            "{s:?}"
        );
    }
    let message = result.assertions[0].message.as_deref().expect("message");
    assert!(!message.contains('\x1b'), "{message:?}");
    assert!(message.contains("\\e[31m"), "{message:?}");
}

#[test]
fn a_file_with_only_unreadable_entries_says_how_many() {
    let text = r#"<testsuite name="s"><testcase/><testcase classname="x"/></testsuite>"#;
    let (_dir, path) = temp("nameless.xml", text.as_bytes());
    let text = import_file(&path, None).expect_err("empty").to_string();
    assert!(text.contains("nameless.xml"), "{text}");
    assert!(text.contains("2 entries unreadable"), "{text}");
}

#[test]
fn times_without_offset_read_as_utc() {
    assert_eq!(
        normalise_time("2026-01-02T03:04:05.5").as_deref(),
        Some("2026-01-02T03:04:05.500000Z")
    );
    assert_eq!(normalise_time("yesterday"), None);
}
