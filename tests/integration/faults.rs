//! S3 faults: a store that answers every third request with HTTP 503 or 500, and a proxy in front
//! of a real store that injects 5xx answers, connection resets, responses held past the timeout,
//! bodies cut short or gone silent, and flipped bytes. Transient faults are retried (the SDK's
//! retries with backoff; reads resumed where they broke off) and the summary counts them by kind;
//! corruption fails the batch and records nothing; a rerun converges.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use outbox_archiver::{verify, verify::VerifyOptions};
use outbox_archiver::{S3Settings, StoreStats};

use crate::support::misbehaving::misbehaving;
use crate::support::proxy::{Fault, FaultProxy, Seen};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_5xx_faults_are_retried_and_the_run_succeeds() {
    let calls = Arc::new(AtomicU64::new(0));
    let faults = Arc::new(AtomicU64::new(0));
    let (counted, injected) = (calls.clone(), faults.clone());
    // Every third object request fails, alternately with 503 SlowDown and 500 InternalError.
    let s3 = misbehaving(
        move |_| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            if n % 3 != 2 {
                return Ok(());
            }
            injected.fetch_add(1, Ordering::SeqCst);
            if n % 2 == 0 {
                Err(s3s::s3_error!(SlowDown, "injected 503"))
            } else {
                Err(s3s::s3_error!(InternalError, "injected 500"))
            }
        },
        |_, bytes| bytes,
    )
    .await;
    let store = s3.store().await;
    let db = TestDb::new().await;
    db.insert(&rows("a1", 60)).await;
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.limits.max_rows = 10;
    let summary = archive(&env(&db, store.clone(), T0 + DAY), &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    assert!(
        faults.load(Ordering::SeqCst) >= 10,
        "faults were injected: {}",
        faults.load(Ordering::SeqCst)
    );
    assert_eq!(
        archived_rows(&db, store.as_ref(), "a1").await,
        db.expected_rows("a1", T0 + DAY).await
    );
    assert_eq!(db.receipts("a1").await.len(), 6);
    eprintln!(
        "faults: {} of {} object requests failed with 5xx and were retried",
        faults.load(Ordering::SeqCst),
        calls.load(Ordering::SeqCst)
    );
}

/// The test's S3 settings pointed at `proxy`, with short timeouts and backoffs so the faults cost
/// little time.
fn through(proxy: &FaultProxy, s3: &TestS3) -> S3Settings {
    S3Settings {
        endpoint: Some(proxy.endpoint.clone()),
        max_attempts: Some(5),
        connect_timeout: Some(Duration::from_secs(2)),
        read_timeout: Some(Duration::from_millis(400)),
        initial_backoff: Some(Duration::from_millis(50)),
        ..s3.settings.clone()
    }
}

/// A GET of an object (not of a bucket listing): the requests whose bodies the proxy may cut.
fn object_get(seen: &Seen) -> bool {
    seen.method == Method::GET && seen.path.trim_start_matches('/').contains('/')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_faults_through_a_proxy_are_retried_reported_and_lose_nothing() {
    let s3 = TestS3::new().await;
    // Every third request is faulted, the kinds in turn (object GETs and other requests each
    // have their own turn, so every kind comes up whatever else the run asks first); body faults
    // go to object GETs.
    let turns = [
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicUsize::new(0),
    ];
    let proxy = FaultProxy::start(s3.settings.endpoint.as_deref().unwrap(), move |seen| {
        if seen.n % 3 != 1 {
            return Fault::Pass;
        }
        let turn = turns[usize::from(object_get(seen))].fetch_add(1, Ordering::SeqCst);
        let kinds: &[Fault] = if object_get(seen) {
            &[
                Fault::Status(503),
                Fault::TruncateBody,
                Fault::Reset,
                Fault::StallBody,
                Fault::Status(500),
                Fault::StallResponse,
            ]
        } else {
            &[
                Fault::Status(503),
                Fault::Reset,
                Fault::Status(500),
                Fault::StallResponse,
            ]
        };
        kinds[turn % kinds.len()]
    })
    .await;
    let store = outbox_archiver::open_store(s3.location.clone(), &through(&proxy, &s3))
        .await
        .unwrap();
    let db = TestDb::new().await;
    for app in ["a1", "a2"] {
        db.insert(
            &(0..30)
                .map(|i| row(app, &format!("{app}-{i:02}"), T0 + i))
                .collect::<Vec<_>>(),
        )
        .await;
    }
    let mut opts = options(&db, &["a1", "a2"], T0 + DAY);
    opts.limits.max_rows = 10;
    let env = env(&db, store.clone(), T0 + DAY);
    let summary = archive(&env, &opts).await;
    let during_archive = proxy.injected();
    assert!(summary.ok, "{}", summary.to_json());
    for app in ["a1", "a2"] {
        assert_eq!(
            archived_rows(&db, store.as_ref(), app).await,
            db.expected_rows(app, T0 + DAY).await,
            "{app}: every row once"
        );
        assert_eq!(db.receipts(app).await.len(), 3);
    }
    let reported = summary
        .store_requests
        .expect("an S3 store reports its requests");
    let injected = |kinds: &[Fault]| {
        during_archive
            .iter()
            .filter(|(fault, _)| kinds.contains(fault))
            .count() as u64
    };
    // A cut body is resumed when the client already has the headers, which the 150 ms pause
    // before the cut nearly always gives; on a machine too loaded for that, the SDK sees the cut
    // as a connection error and retries the whole request. Either way it is counted once.
    let (cut, silent) = (
        injected(&[Fault::TruncateBody]),
        injected(&[Fault::StallBody]),
    );
    let expected = StoreStats {
        attempts: reported.attempts,
        server_errors: injected(&[Fault::Status(503), Fault::Status(500)]),
        timeouts: injected(&[Fault::StallResponse]),
        connection_errors: injected(&[Fault::Reset]) + cut + silent - reported.resumed_reads,
        resumed_reads: reported.resumed_reads,
        by_operation: reported.by_operation,
    };
    assert_eq!(
        reported, expected,
        "the summary reports each injected fault by kind: {during_archive:?}"
    );
    let ops = reported.by_operation;
    assert_eq!(
        ops.head + ops.get + ops.put + ops.list + ops.delete,
        reported.attempts,
        "every attempt is counted under its operation: {ops:?}"
    );
    assert!(
        reported.resumed_reads >= silent,
        "a body gone silent is always resumed: {reported:?}"
    );
    for kind in [
        Fault::Status(503),
        Fault::Status(500),
        Fault::Reset,
        Fault::StallResponse,
        Fault::TruncateBody,
        Fault::StallBody,
    ] {
        assert!(injected(&[kind]) > 0, "{kind:?} was injected");
    }
    let archived_faults = proxy.injected().len();

    // The whole archive reads back through the same faults, and verifies.
    let verified = verify::run(&env, &VerifyOptions::everything(T0 + DAY, "DELIVERED")).await;
    assert!(verified.ok, "{}", verified.to_json());
    assert!(verified.store_requests.unwrap().faults() > 0);
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for (fault, _) in proxy.injected() {
        *by_kind.entry(format!("{fault:?}")).or_default() += 1;
    }
    eprintln!(
        "proxy faults: {} during archive ({reported:?}), {} during verify; by kind over both: {by_kind:?}",
        archived_faults,
        proxy.injected().len() - archived_faults
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_bytes_through_a_proxy_are_caught_and_nothing_is_recorded() {
    let s3 = TestS3::new().await;
    // Phase 0 flips a byte in the first data object's upload, phase 1 in every data object
    // download, phase 2 passes everything.
    let phase = Arc::new(AtomicU64::new(0));
    let flipping = phase.clone();
    let proxy = FaultProxy::start(s3.settings.endpoint.as_deref().unwrap(), move |seen| {
        let data = seen.path.ends_with("/data.ndjson.gz");
        match flipping.load(Ordering::SeqCst) {
            0 if data && seen.method == Method::PUT => Fault::FlipByte,
            1 if data && seen.method == Method::GET => Fault::FlipByte,
            _ => Fault::Pass,
        }
    })
    .await;
    let store = outbox_archiver::open_store(s3.location.clone(), &through(&proxy, &s3))
        .await
        .unwrap();
    let db = TestDb::new().await;
    db.insert(&rows("a1", 20)).await;
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.limits.max_rows = 10;
    let env = env(&db, store.clone(), T0 + DAY);

    let upload = archive(&env, &opts).await;
    assert!(!upload.ok);
    // AWS answers 400 BadDigest; s3s-fs answers 500, which is retried, each time flipped.
    let error = upload.apps[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("data.ndjson.gz")
            && (error.contains("upload checksum did not match") || error.contains("HTTP 500")),
        "{error}"
    );
    assert!(db.receipts("a1").await.is_empty(), "nothing recorded");

    phase.store(1, Ordering::SeqCst);
    let download = archive(&env, &opts).await;
    assert!(!download.ok);
    let error = download.apps[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("read-back of") && error.contains("does not match"),
        "{error}"
    );
    assert!(db.receipts("a1").await.is_empty(), "nothing recorded");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
            .await,
        0
    );

    phase.store(2, Ordering::SeqCst);
    let clean = archive(&env, &opts).await;
    assert!(clean.ok, "{}", clean.to_json());
    assert_eq!(
        archived_rows(&db, store.as_ref(), "a1").await,
        db.expected_rows("a1", T0 + DAY).await
    );
    let verified = verify::run(&env, &VerifyOptions::everything(T0 + DAY, "DELIVERED")).await;
    assert!(verified.ok, "{}", verified.to_json());
    eprintln!("flipped bytes: {:?}", proxy.injected());
}
