//! `--project`: the inspector and `tail` act for one project of a runtime holding several,
//! sending `x-codespar-project` on the stream and on REST; the status bar names it.

use crate::support::runtime::{Api, test_server};
use crate::support::ui::{Live, until};
use serde_json::json;
use spyglass::client::Endpoint;
use spyglass::client::tail::{Format, tail};

const SIZE: (u16, u16) = (140, 24);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_and_tail_see_only_their_projects_sessions() {
    let handle = test_server().await;
    let url = handle.url();
    let mocks = json!({"asaas/create_payment": {"id": "pay_1"}});
    let ours = Api::new(&handle).with_tenant("prj_alpha0123456789");
    let theirs = Api::new(&handle);
    let (status, _) = theirs
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "bob", "mocks": mocks}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, created) = ours
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "alice", "mocks": mocks}),
        )
        .await;
    assert_eq!(status, 201, "{created}");

    let Live {
        mut app, mut rx, ..
    } = Live::for_project(&url, "prj_alpha0123456789");
    let text = until(&mut app, &mut rx, SIZE, "the project's session", |s| {
        s.contains("alice")
    })
    .await;
    assert!(text.contains("project prj_alpha0123456789"), "{text}");
    // A session of the default project made after connecting does not show either.
    let (status, _) = theirs
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "carol", "mocks": mocks}),
        )
        .await;
    assert_eq!(status, 201);
    let sid = created["id"].as_str().unwrap();
    let (status, _) = ours.execute(sid, "asaas/create_payment", json!({})).await;
    assert_eq!(status, 200);
    let text = until(&mut app, &mut rx, SIZE, "the project's call", |s| {
        s.contains("│ seq 2 │")
    })
    .await;
    assert!(!text.contains("bob"), "{text}");
    assert!(!text.contains("carol"), "{text}");

    // tail for the same project: its two events, none of the default project's three.
    let (out, said) = tail_json(&url, "prj_alpha0123456789", 2).await;
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains("alice"), "{out}");
    assert!(!out.contains("bob") && !out.contains("carol"), "{out}");
    assert!(said.contains("(project prj_alpha0123456789)"), "{said}");
}

/// `--project '*'` against a real runtime holding two projects: the inspector sees both
/// projects' sessions, each row naming its project and the status bar "all projects";
/// deciding is refused with the fix named; `tail` prints both projects' events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_project_on_one_screen_and_one_tail() {
    let handle = test_server().await;
    let url = handle.url();
    let mocks = json!({"asaas/create_payment": {"id": "pay_1"}});
    let alpha = Api::new(&handle).with_tenant("prj_alpha");
    let beta = Api::new(&handle).with_tenant("prj_beta");
    for (api, user) in [(&alpha, "alice"), (&beta, "bruno")] {
        let (status, created) = api
            .post(
                "/v1/sessions",
                json!({"servers": ["asaas"], "user_id": user, "mocks": mocks}),
            )
            .await;
        assert_eq!(status, 201, "{created}");
    }

    let Live {
        mut app, mut rx, ..
    } = Live::for_project(&url, "*");
    let text = until(&mut app, &mut rx, SIZE, "both projects' sessions", |s| {
        s.contains("alice") && s.contains("bruno")
    })
    .await;
    assert!(text.contains("all projects"), "{text}");
    assert!(text.contains("PROJECT"), "{text}");
    let row = |who: &str| {
        text.lines()
            .find(|l| l.contains(who))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(row("alice").contains("prj_alpha"), "{text}");
    assert!(row("bruno").contains("prj_beta"), "{text}");
    // A session made after connecting arrives too, from either project.
    let (status, _) = beta
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "carla", "mocks": mocks}),
        )
        .await;
    assert_eq!(status, 201);
    let text = until(&mut app, &mut rx, SIZE, "the new session", |s| {
        s.contains("carla")
    })
    .await;
    assert!(
        text.contains("│ seq 3 │"),
        "one seq across projects: {text}"
    );
    // Nothing is decided from the every-project stream: the key says so at once.
    app.tab = spyglass::ui::Tab::Approvals;
    app.dispatch(spyglass::ui::Action::Approve);
    let says = app.notice.clone().unwrap_or_default();
    assert!(
        says.contains("watching every project") && says.contains("--project P"),
        "{says}"
    );

    let (out, _) = tail_json(&url, "*", 3).await;
    for user in ["alice", "bruno", "carla"] {
        assert!(out.contains(user), "{user} in {out}");
    }
}

/// `tail --json` for `project` until `n` events: what it printed, and its status lines.
async fn tail_json(url: &str, project: &str, n: u64) -> (String, String) {
    let endpoint = Endpoint {
        project: Some(project.into()),
        ..Endpoint::new(url)
    };
    let mut out = Vec::new();
    let mut status_lines = Vec::new();
    tail(
        &endpoint,
        Format::JsonLines,
        Some(n),
        || Ok(&mut out),
        &mut status_lines,
        std::future::pending(),
        std::future::pending(),
    )
    .await
    .unwrap();
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(status_lines).unwrap(),
    )
}
