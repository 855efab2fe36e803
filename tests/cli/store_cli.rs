//! `spyglass store status` and `spyglass store migrate` on a real Postgres database, and
//! `serve --store-pool` refused where it would mean nothing: what an operator types, what
//! it prints and its exit status.

use crate::support::cli::spyglass;
use crate::support::postgres::{cluster, fresh_database};
use std::process::Output;

fn run(args: &[&str]) -> Output {
    spyglass(args).output().expect("run spyglass")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn status_then_migrate_then_status() {
    let url = fresh_database("cli_store");
    let before = run(&["store", "status", "--store", &url]);
    let (out, err) = (text(&before.stdout), text(&before.stderr));
    assert_eq!(before.status.code(), Some(1), "no schema: {out}{err}");
    assert!(out.contains("schema     none"), "{out}");
    assert!(err.contains("no spyglass schema"), "{err}");
    assert!(
        err.contains("spyglass store migrate"),
        "says what to do: {err}"
    );

    let migrated = run(&["store", "migrate", "--store", &url]);
    let out = text(&migrated.stdout);
    assert!(migrated.status.success(), "{out}{}", text(&migrated.stderr));
    assert!(out.contains("schema version 1 (created)"), "{out}");
    let again = run(&["store", "migrate", "--store", &url]);
    assert!(text(&again.stdout).contains("schema version 1 (already)"));

    let after = run(&["store", "status", "--store", &url]);
    let out = text(&after.stdout);
    assert!(after.status.success(), "{out}{}", text(&after.stderr));
    let database = url.rsplit('/').next().unwrap();
    assert!(out.contains(database), "{out}");
    assert!(out.contains("schema     1\n"), "{out}");
    assert!(out.contains("supported  yes"), "{out}");
    assert!(out.contains("events     0\n"), "{out}");
    assert!(out.contains("sessions   0\n"), "{out}");
}

#[test]
fn a_newer_schema_fails_status_and_migrate() {
    let url = fresh_database("cli_newer");
    assert!(run(&["store", "migrate", "--store", &url]).status.success());
    bump_version(&url);
    let status = run(&["store", "status", "--store", &url]);
    let (out, err) = (text(&status.stdout), text(&status.stderr));
    assert_eq!(status.status.code(), Some(1), "{out}{err}");
    assert!(out.contains("supported  no (newer)"), "{out}");
    assert!(err.contains("run a newer spyglass"), "{err}");
    let migrate = run(&["store", "migrate", "--store", &url]);
    let err = text(&migrate.stderr);
    assert_eq!(migrate.status.code(), Some(1), "{err}");
    assert!(err.contains("schema version 7"), "{err}");
}

/// The schema as a newer spyglass would leave it.
fn bump_version(url: &str) {
    let url = url.to_owned();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                let driver = tokio::spawn(conn);
                client
                    .batch_execute("UPDATE spyglass_schema SET version = 7")
                    .await
                    .unwrap();
                drop(client);
                let _ = driver.await;
            });
    })
    .join()
    .unwrap();
}

#[test]
fn bad_store_urls_are_refused_saying_what_to_give() {
    let not_pg = run(&["store", "status", "--store", "/tmp/runtime.db"]);
    let err = text(&not_pg.stderr);
    assert_eq!(not_pg.status.code(), Some(2), "{err}");
    assert!(err.contains("not a postgres:// URL"), "{err}");

    let port = cluster().port();
    let bad = run(&[
        "store",
        "status",
        "--store",
        &format!("postgres://u:hunter2@127.0.0.1:{port}x/db"),
    ]);
    let err = text(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "bad input: {err}");
    assert!(err.contains("give postgres://"), "{err}");
    assert!(!err.contains("hunter2"), "no password in messages: {err}");

    let missing = run(&["store", "status", "--store", &cluster().url("nowhere_db")]);
    let err = text(&missing.stderr);
    assert_eq!(missing.status.code(), Some(1), "{err}");
    assert!(err.contains("\"nowhere_db\" does not exist"), "{err}");

    let nobody = run(&[
        "store",
        "status",
        "--store",
        &format!(
            "postgres://spyglass@127.0.0.1:{}/db",
            crate::support::postgres::free_port()
        ),
    ]);
    let err = text(&nobody.stderr);
    assert_eq!(nobody.status.code(), Some(1), "status asks once: {err}");
    assert!(
        err.contains("cannot reach the database: connection refused"),
        "{err}"
    );
}

#[test]
fn store_pool_is_refused_for_a_store_it_does_not_size() {
    let memory = run(&["serve", "--store", "memory", "--store-pool", "4"]);
    let err = text(&memory.stderr);
    assert_eq!(memory.status.code(), Some(2), "{err}");
    assert!(err.contains("--store-pool"), "{err}");
    assert!(err.contains("postgres://"), "{err}");
    let zero = run(&["serve", "--store-pool", "0"]);
    assert_eq!(zero.status.code(), Some(2), "{}", text(&zero.stderr));
    let env = spyglass(&["serve", "--store", "postgres://u:pw@127.0.0.1:1/db"])
        .env("SPYGLASS_STORE_POOL", "many")
        .output()
        .unwrap();
    let err = text(&env.stderr);
    assert_eq!(env.status.code(), Some(2), "{err}");
    assert!(
        err.contains("SPYGLASS_STORE_POOL") && err.contains("'many'"),
        "{err}"
    );
}
