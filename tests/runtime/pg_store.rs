//! The Postgres store over a real Postgres (tests/support/postgres.rs): the schema made
//! once and refused when newer, one truth across two stores (claims, decisions, seqs),
//! NOTIFY heard and re-heard after a dropped connection, and start's waiting and failing.

use crate::support::postgres::{Cluster, cluster, fresh_database};
use spyglass::runtime::log::Logged;
use spyglass::store::postgres::{CHANNEL, Decided, PgSettings, PgStore, SCHEMA_VERSION};
use spyglass::store::{StateWrite, Store, StoreError, StoredRecord};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn settings(replica: &str) -> PgSettings {
    PgSettings {
        pool_size: 8,
        replica: replica.to_owned(),
    }
}

async fn open(url: &str, replica: &str) -> PgStore {
    PgStore::connect(url, settings(replica), &|reason| {
        panic!("the test database is up, yet start waited: {reason}")
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"))
}

/// A `session.created` for `session`, unstamped, as the log hands it to the store.
fn event(tenant: &str, session: &str) -> Arc<Logged> {
    let frame = serde_json::json!({
        "kind": "session.created", "seq": 0, "ts": "2026-01-01T00:00:00Z",
        "sessionId": session, "userId": "u", "servers": [], "project": tenant,
    });
    Arc::new(Logged::restore(&frame.to_string(), tenant.to_owned()).expect("a valid frame"))
}

/// A SQL statement on its own connection, as an operator (or another version) would.
async fn exec(url: &str, sql: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(conn);
    client.batch_execute(sql).await.unwrap();
    drop(client);
    let _ = driver.await;
}

async fn count(url: &str, sql: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(conn);
    let n: i64 = client.query_one(sql, &[]).await.unwrap().get(0);
    drop(client);
    let _ = driver.await;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_is_made_on_an_empty_database_and_kept_on_reopening() {
    let url = fresh_database("schema_made");
    let missing = PgStore::inspect(&url).await.unwrap();
    assert_eq!(missing.version, None, "nothing created by looking");
    let store = open(&url, "a").await;
    let status = store.status().await.unwrap();
    assert_eq!(status.version, Some(SCHEMA_VERSION));
    assert_eq!((status.events, status.sessions), (0, 0));
    let record = StoredRecord {
        kind: "session".into(),
        tenant: "default".into(),
        key: "s1".into(),
        value: "{}".into(),
    };
    let events = [event("default", "s1"), event("default", "s2")];
    let seqs = std::thread::scope(|s| {
        s.spawn(|| store.append_stamping(&events, &[], &[StateWrite::Put(record.clone())]))
            .join()
            .unwrap()
    })
    .unwrap();
    assert_eq!(seqs, vec![1, 2]);
    let epoch = store.open_stream("first", 100).await.unwrap().epoch;
    // The sync calls from inside the runtime too (a runtime opening on the store calls
    // them from async code): no panic, the same answers.
    assert_eq!(store.stream("other", 100).unwrap().epoch, epoch);
    assert_eq!(store.state().unwrap().len(), 1);
    assert_eq!(
        store.stream("other", 1).unwrap().events.len(),
        1,
        "the newest retained"
    );
    drop(store);

    let again = open(&url, "b").await;
    let status = again.status().await.unwrap();
    assert_eq!(status.version, Some(SCHEMA_VERSION));
    assert_eq!((status.events, status.sessions), (2, 1));
    let stream = again.open_stream("second", 100).await.unwrap();
    assert_eq!(stream.epoch, epoch, "the epoch is made once");
    assert_eq!(stream.next_seqs, vec![("default".to_owned(), 3)]);
    let seqs: Vec<u64> = stream.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2]);
    assert!(
        stream.events[1].text.contains("\"seq\":2"),
        "{}",
        stream.events[1].text
    );
    assert_eq!(again.open_state().await.unwrap(), vec![record.clone()]);
    assert_eq!(
        again.record("session", "default", "s1").await.unwrap(),
        Some(record)
    );
    assert_eq!(
        again.heads().await.unwrap(),
        vec![("default".to_owned(), 2)]
    );
    assert_eq!(
        count(&url, "SELECT count(*) FROM spyglass_schema").await,
        1,
        "one version row"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_is_refused_naming_the_database() {
    let url = fresh_database("schema_newer");
    drop(open(&url, "a").await);
    exec(&url, "UPDATE spyglass_schema SET version = 99").await;
    let err = PgStore::connect(&url, settings("b"), &|_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::NewerSchema { found: 99, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    let database = url.rsplit('/').next().unwrap();
    assert!(text.contains(database), "{text}");
    assert!(text.contains("run a newer spyglass"), "{text}");
    let status = PgStore::inspect(&url).await.unwrap();
    assert_eq!(status.version, Some(99));
    assert_eq!(
        count(&url, "SELECT max(version) FROM spyglass_schema").await,
        99,
        "left as it was"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_make_one_schema() {
    let url = fresh_database("schema_race");
    let opened = futures_util::future::join_all(
        (0..4).map(|i| PgStore::connect(&url, settings(&format!("r{i}")), &|_| {})),
    )
    .await;
    for store in &opened {
        let store = store.as_ref().unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(store.status().await.unwrap().version, Some(SCHEMA_VERSION));
    }
    assert_eq!(count(&url, "SELECT count(*) FROM spyglass_schema").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_over_two_stores_serve_each_entry_once() {
    let url = fresh_database("claims");
    let a = Arc::new(open(&url, "a").await);
    let b = Arc::new(open(&url, "b").await);
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { store.claim("default", "s1", "pay/charge", 10).await })
        })
        .collect();
    let mut served = Vec::new();
    let mut none = 0;
    for task in tasks {
        match task.await.unwrap().unwrap() {
            Some(index) => served.push(index),
            None => none += 1,
        }
    }
    served.sort_unstable();
    assert_eq!(served, (0..10).collect::<Vec<u32>>(), "each entry once");
    assert_eq!(none, 54);
    assert_eq!(
        a.claimed("default", "s1").await.unwrap(),
        vec![("pay/charge".to_owned(), 10)]
    );
    assert_eq!(
        b.claim("default", "s1", "other/tool", 0).await.unwrap(),
        None
    );
    assert_eq!(
        b.claim("other", "s1", "pay/charge", 10).await.unwrap(),
        Some(0),
        "per tenant"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raced_decision_has_one_winner_and_expiry_is_final() {
    let url = fresh_database("decisions");
    let a = open(&url, "a").await;
    let b = open(&url, "b").await;
    let far = chrono::Utc::now().timestamp_millis() + 600_000;
    let mut winners = Vec::new();
    for round in 0..20 {
        let approval = format!("apr_{round}");
        let (on_a, on_b) = tokio::join!(
            a.decide("default", &approval, "approved", far),
            b.decide("default", &approval, "denied", far),
        );
        match (on_a.unwrap(), on_b.unwrap()) {
            (Decided::Won, Decided::Already(first)) => assert_eq!(first, "approved"),
            (Decided::Already(first), Decided::Won) => assert_eq!(first, "denied"),
            other => panic!("round {round}: not one winner: {other:?}"),
        }
        winners.push(
            match a.decide("default", &approval, "again", far).await.unwrap() {
                Decided::Already(first) => first,
                other => panic!("round {round}: a third decision {other:?}"),
            },
        );
    }
    let past = chrono::Utc::now().timestamp_millis() - 1;
    assert_eq!(
        a.decide("default", "apr_late", "approved", past)
            .await
            .unwrap(),
        Decided::Expired
    );
    assert_eq!(
        b.decide("default", "apr_late", "denied", past)
            .await
            .unwrap(),
        Decided::Expired,
        "still expired on the other"
    );
    assert_eq!(
        b.decide("default", "apr_0", "denied", past).await.unwrap(),
        Decided::Already(winners[0].clone()),
        "a decision made in time stands after the expiry"
    );
    assert_eq!(
        b.decide("other", "apr_0", "denied", far).await.unwrap(),
        Decided::Won,
        "per tenant"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stamping_from_two_stores_gives_each_tenant_gapless_seqs() {
    let url = fresh_database("stamping");
    let a = Arc::new(open(&url, "replica-a").await);
    let b = Arc::new(open(&url, "replica-b").await);
    let tenants = ["t1", "t2", "t3"];
    // The writer threads are std threads, as the log's writer is.
    let threads: Vec<_> = (0..6)
        .map(|w| {
            let store = if w % 2 == 0 { a.clone() } else { b.clone() };
            std::thread::spawn(move || {
                let mut got: Vec<(String, u64)> = Vec::new();
                for batch in 0..25 {
                    let events: Vec<Arc<Logged>> = (0..=(w + batch) % 5)
                        .map(|i| event(tenants[(w + batch + i) % 3], &format!("w{w}b{batch}i{i}")))
                        .collect();
                    // Shared documents, written in opposite orders by the two sides:
                    // commits must not deadlock on them.
                    let mut docs: Vec<StateWrite> = (0..4)
                        .map(|k| {
                            StateWrite::Put(StoredRecord {
                                kind: "counters".into(),
                                tenant: "t1".into(),
                                key: format!("k{k}"),
                                value: format!("{{\"w\":{w}}}"),
                            })
                        })
                        .collect();
                    if w % 2 == 1 {
                        docs.reverse();
                    }
                    let seqs = store.append_stamping(&events, &[], &docs).unwrap();
                    assert_eq!(seqs.len(), events.len());
                    for (event, seq) in events.iter().zip(seqs) {
                        got.push((event.tenant.to_string(), seq));
                    }
                }
                got
            })
        })
        .collect();
    let mut per_tenant: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for thread in threads {
        for (tenant, seq) in thread.join().unwrap() {
            per_tenant.entry(tenant).or_default().push(seq);
        }
    }
    let mut origins = std::collections::BTreeSet::new();
    for (tenant, mut seqs) in per_tenant {
        seqs.sort_unstable();
        let n = seqs.len() as u64;
        assert_eq!(
            seqs,
            (1..=n).collect::<Vec<u64>>(),
            "{tenant}: no gap, no duplicate"
        );
        let stored = a.events_after(&tenant, 0, 10_000).await.unwrap();
        let stored_seqs: Vec<u64> = stored.iter().map(|(e, _)| e.seq).collect();
        assert_eq!(
            stored_seqs,
            (1..=n).collect::<Vec<u64>>(),
            "{tenant}: in seq order"
        );
        for (event, origin) in &stored {
            assert!(
                event.text.contains(&format!("\"seq\":{}", event.seq)),
                "the text carries its seq: {}",
                event.text
            );
            origins.insert(origin.clone());
        }
        let tail = b.events_after(&tenant, n - 2, 10).await.unwrap();
        assert_eq!(
            tail.iter().map(|(e, _)| e.seq).collect::<Vec<_>>(),
            vec![n - 1, n]
        );
        assert_eq!(
            b.events_after(&tenant, 0, 3).await.unwrap().len(),
            3,
            "limit"
        );
    }
    assert_eq!(
        origins.into_iter().collect::<Vec<_>>(),
        vec!["replica-a".to_owned(), "replica-b".to_owned()]
    );
    assert_eq!(keys(&a).await, vec!["k0", "k1", "k2", "k3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_and_state_deletes_leave_the_database() {
    let url = fresh_database("evictions");
    let store = Arc::new(open(&url, "a").await);
    let put = |key: &str| {
        StateWrite::Put(StoredRecord {
            kind: "session".into(),
            tenant: "default".into(),
            key: key.into(),
            value: format!("{{\"id\":\"{key}\"}}"),
        })
    };
    let writer = store.clone();
    std::thread::spawn(move || {
        let events: Vec<_> = (0..5).map(|i| event("default", &format!("s{i}"))).collect();
        writer
            .append_stamping(&events, &[], &[put("s0"), put("s1")])
            .unwrap();
        let delete = StateWrite::Delete(StoredRecord {
            kind: "session".into(),
            tenant: "default".into(),
            key: "s0".into(),
            value: String::new(),
        });
        writer
            .append_stamping(&[], &[("default".to_owned(), 3)], &[delete])
            .unwrap();
    })
    .join()
    .unwrap();
    let left: Vec<u64> = store
        .events_after("default", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|(e, _)| e.seq)
        .collect();
    assert_eq!(left, vec![4, 5], "seq 3 and older evicted");
    let state = store.open_state().await.unwrap();
    assert_eq!(state.len(), 1);
    assert_eq!(state[0].key, "s1");
    assert_eq!(
        store.heads().await.unwrap(),
        vec![("default".to_owned(), 5)],
        "seqs go on"
    );
}

/// The keys of the documents the store holds, in its order.
async fn keys(store: &PgStore) -> Vec<String> {
    store
        .open_state()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect()
}

/// What `mixes` left: each kept event's seq with its session, and the documents' keys.
type Left = (BTreeMap<u64, String>, Vec<String>);

/// Sixteen batches, one of each mix of events, an eviction, a put and a delete (each
/// mix is its own statement), asserting each batch's seqs; returns what should be left.
fn mixes(store: &PgStore) -> Left {
    let doc = |key: &str, value: String| StoredRecord {
        kind: "session".into(),
        tenant: "default".into(),
        key: key.into(),
        value,
    };
    let (mut kept, mut docs) = (BTreeMap::new(), Vec::<String>::new());
    let mut next_seq = 1u64;
    for mask in 0u8..16 {
        let names: Vec<String> = if mask & 1 == 0 {
            vec![]
        } else {
            vec![format!("m{mask}a"), format!("m{mask}b")]
        };
        let events: Vec<_> = names.iter().map(|n| event("default", n)).collect();
        // Everything but the newest event kept so far.
        let evicted = match kept.keys().next_back() {
            Some(&newest) if mask & 2 != 0 && newest > 1 => {
                vec![("default".to_owned(), newest - 1)]
            }
            _ => vec![],
        };
        let mut state = vec![];
        if mask & 4 != 0 {
            state.push(StateWrite::Put(doc(
                &format!("k{mask}"),
                format!("{{\"mask\":{mask}}}"),
            )));
        }
        let deleted = (mask & 8 != 0 && !docs.is_empty()).then(|| docs.remove(0));
        if let Some(key) = &deleted {
            state.push(StateWrite::Delete(doc(key, String::new())));
        }
        let seqs = store
            .append_stamping(&events, &evicted, &state)
            .unwrap_or_else(|err| panic!("mix {mask:04b}: {err}"));
        let expected: Vec<u64> = (next_seq..next_seq + names.len() as u64).collect();
        assert_eq!(seqs, expected, "mix {mask:04b}");
        next_seq += names.len() as u64;
        if let Some((_, upto)) = evicted.first() {
            kept.retain(|seq, _| seq > upto);
        }
        kept.extend(seqs.into_iter().zip(names));
        if mask & 4 != 0 {
            docs.push(format!("k{mask}"));
        }
    }
    docs.sort();
    (kept, docs)
}

/// What the database holds: each event's seq with its session (its text decoded, so the
/// text written around the seq in the database must be the frame with that seq), and the
/// documents' keys.
async fn left(store: &PgStore) -> Left {
    let mut kept = BTreeMap::new();
    for (stored, origin) in store.events_after("default", 0, 1000).await.unwrap() {
        assert_eq!(origin, "a");
        let frame = spyglass::protocol::decode(&stored.text)
            .unwrap_or_else(|err| panic!("stored text {}: {err}", stored.text));
        assert_eq!(frame.seq, stored.seq, "{}", stored.text);
        kept.insert(stored.seq, frame.session_id.unwrap_or_default().to_string());
    }
    let mut docs = keys(store).await;
    docs.sort();
    (kept, docs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mix_of_events_evictions_puts_and_deletes_commits_as_one_statement() {
    // The writer thread's own connection (no runtime on the calling thread)...
    let url = fresh_database("mixes_own");
    let store = Arc::new(open(&url, "a").await);
    let writer = store.clone();
    let expected = std::thread::spawn(move || mixes(&writer)).join().unwrap();
    assert!(
        expected.0.len() >= 2 && !expected.1.is_empty(),
        "{expected:?}"
    );
    assert_eq!(left(&store).await, expected);
    // ...and a pooled one (a caller inside a runtime).
    let url = fresh_database("mixes_pooled");
    let store = open(&url, "a").await;
    let expected = tokio::task::block_in_place(|| mixes(&store));
    assert_eq!(left(&store).await, expected);
}

async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Option<String>>) -> Option<String> {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a notification within 10 s")
        .expect("the listener is running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_hears_the_tenants_written_and_says_so_after_a_dropped_connection() {
    let url = fresh_database("listen");
    let a = open(&url, "a").await;
    let b = Arc::new(open(&url, "b").await);
    let mut heard = a.listen().await.unwrap();
    let write = |tenants: &'static [&'static str]| {
        let b = b.clone();
        std::thread::spawn(move || {
            let events: Vec<_> = tenants.iter().map(|t| event(t, "s")).collect();
            b.append_stamping(&events, &[], &[]).unwrap();
        })
        .join()
        .unwrap();
    };
    write(&["alpha", "beta", "alpha"]);
    let mut got = vec![next(&mut heard).await, next(&mut heard).await];
    got.sort();
    assert_eq!(
        got,
        vec![Some("alpha".to_owned()), Some("beta".to_owned())],
        "once per tenant"
    );

    // The database drops the listening connection: the listener comes back and says
    // "look at every tenant" once, then hears on as before.
    exec(
        &url,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN {CHANNEL}'"
        ),
    )
    .await;
    assert_eq!(
        next(&mut heard).await,
        None,
        "reconnected: look at every tenant"
    );
    write(&["gamma"]);
    assert_eq!(next(&mut heard).await, Some("gamma".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_waits_while_the_database_is_unreachable_then_connects() {
    let mut later = Cluster::init();
    let url = later.url("postgres");
    let reasons = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = reasons.clone();
    let connecting = tokio::spawn(async move {
        PgStore::connect(&url, settings("a"), &move |reason| {
            seen.lock().unwrap().push(reason.to_owned());
        })
        .await
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while reasons.lock().unwrap().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "on_wait never called");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!connecting.is_finished(), "still waiting, not given up");
    tokio::task::block_in_place(|| later.start());
    let store = tokio::time::timeout(Duration::from_secs(20), connecting)
        .await
        .expect("connected within 20 s of the database starting")
        .unwrap()
        .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(store.status().await.unwrap().version, Some(SCHEMA_VERSION));
    let reasons = reasons.lock().unwrap().clone();
    assert_eq!(reasons[0], "connection refused", "{reasons:?}");
    eprintln!(
        "fresh cluster: initdb {} ms, start {} ms",
        later.init_took.as_millis(),
        later.start_took.as_millis()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_retrying_cannot_mend_fails_at_once_saying_what_to_do() {
    let cluster = cluster();
    let no_wait = |reason: &str| panic!("waited on a refusal retrying cannot mend: {reason}");
    let fail = |url: String| async move {
        tokio::time::timeout(
            Duration::from_secs(10),
            PgStore::connect(&url, settings("a"), &no_wait),
        )
        .await
        .expect("an answer at once, not a wait")
        .unwrap_err()
        .to_string()
    };
    let missing = fail(cluster.url("no_such_database")).await;
    assert!(
        missing.contains("\"no_such_database\" does not exist"),
        "{missing}"
    );
    assert!(missing.contains("createdb"), "{missing}");
    let role = fail(format!(
        "postgres://nobody_here:secret@127.0.0.1:{}/postgres",
        cluster.port()
    ))
    .await;
    assert!(role.contains("nobody_here"), "{role}");
    assert!(role.contains("check the user"), "{role}");
    assert!(!role.contains("secret"), "no password in messages: {role}");
    let bad = fail(format!(
        "postgres://spyglass@127.0.0.1:{}x/db",
        cluster.port()
    ))
    .await;
    assert!(bad.contains("give postgres://"), "{bad}");
    let tls = fail(format!("{}?sslmode=require", cluster.url("postgres"))).await;
    assert!(tls.contains("sslmode=require is not supported"), "{tls}");
    let scheme = fail("mysql://127.0.0.1/db".to_owned()).await;
    assert!(scheme.contains("not a postgres:// URL"), "{scheme}");
    let err = PgStore::inspect(&cluster.url("no_such_database"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not exist"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starved_pool_answers_an_error_instead_of_hanging() {
    let url = fresh_database("starved");
    let one = PgSettings {
        pool_size: 1,
        replica: "a".to_owned(),
    };
    let store = Arc::new(PgStore::connect(&url, one, &|_| {}).await.unwrap());
    assert_eq!(store.claim("default", "s", "t", 5).await.unwrap(), Some(0));
    // Another client holds the entry's row: the next claim waits on it, holding the
    // pool's one connection.
    let (holder, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    holder
        .batch_execute("BEGIN; SELECT * FROM spyglass_claims FOR UPDATE")
        .await
        .unwrap();
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move { store.claim("default", "s", "t", 5).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let began = std::time::Instant::now();
    let err = store
        .claim("default", "s", "t", 5)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no database connection came free within 5s"),
        "{err}"
    );
    assert!(err.contains("--store-pool"), "says what to raise: {err}");
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
    holder.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        waiting.await.unwrap().unwrap(),
        Some(1),
        "the held call goes on"
    );
    assert_eq!(
        store.claim("default", "s", "t", 5).await.unwrap(),
        Some(2),
        "and so does the pool"
    );
}
