//! One contract for every object store: the same checks run against the local-directory store,
//! against a real S3 server (s3s in this process) with each upload-checksum setting, with and
//! without conditional puts (the HEAD-then-PUT path COS needs), and against moto's S3 server in
//! a bucket with Object Lock and a default retention — which refuses a put that carries neither
//! Content-MD5 nor a checksum, so `--s3-upload-checksum none` cannot be used there.

use bytes::Bytes;
use outbox_archiver::format::Key;
use outbox_archiver::{crc64nvme, sha256_hex};
use outbox_archiver::{
    ConditionalPut, ConditionalPutSetting, LocalStore, Location, ObjectStore, PutMode, StoreError,
    UploadChecksum,
};

use crate::support::moto::{Bucket, MotoS3};
use crate::support::*;

/// Every store, every setting: the contract's named checks, in order, each on its own keys under
/// the store's prefix (object_store's `integration.rs` is the model).
async fn contract(store: &dyn ObjectStore, label: &str) {
    let c = Contract { store, label };
    store
        .confirm_access()
        .await
        .unwrap_or_else(|e| panic!("{label}: check: {e}"));
    c.a_missing_key_reads_as_none().await;
    c.put_then_head_and_get_agree_with_our_checksums().await;
    c.create_never_replaces_an_object().await;
    c.overwrite_replaces_an_object().await;
    c.list_is_sorted_and_by_prefix().await;
    c.delete_is_idempotent().await;
}

struct Contract<'a> {
    store: &'a dyn ObjectStore,
    label: &'a str,
}

impl Contract<'_> {
    fn key(&self, name: &str) -> String {
        self.store.location().prefix().key(name).to_string()
    }

    async fn a_missing_key_reads_as_none(&self) {
        let (store, label) = (self.store, self.label);
        let key = self.key("t/app_code=x/dt=2026-01-01/missing/data.ndjson.gz");
        assert_eq!(
            store.head(&Key::stored(key.clone())).await.unwrap(),
            None,
            "{label}: head"
        );
        assert!(
            store
                .get(&Key::stored(key.clone()))
                .await
                .unwrap()
                .is_none(),
            "{label}: get"
        );
    }

    /// 70,000 bytes: more than one chunk of a streamed GET.
    async fn put_then_head_and_get_agree_with_our_checksums(&self) {
        let (store, label) = (self.store, self.label);
        let key = self.key("t/app_code=x/dt=2026-01-01/put/data.ndjson.gz");
        let body = Bytes::from((0..70_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        store
            .put(&Key::stored(key.clone()), body.clone(), PutMode::Create)
            .await
            .unwrap_or_else(|e| panic!("{label}: put: {e}"));
        let meta = store
            .head(&Key::stored(key.clone()))
            .await
            .unwrap()
            .expect("present");
        assert_eq!(meta.size, body.len() as u64, "{label}");
        if let Some(stored) = meta.crc64nvme {
            assert_eq!(
                stored,
                crc64nvme(&body),
                "{label}: the store's CRC-64/NVME is the one we compute"
            );
        }
        if let Some(stored) = &meta.sha256 {
            assert_eq!(
                stored,
                &sha256_hex(&body),
                "{label}: the store's SHA-256 is the one we compute"
            );
        }
        assert_eq!(
            read(store, &key).await,
            body.to_vec(),
            "{label}: get returns the bytes"
        );
    }

    async fn create_never_replaces_an_object(&self) {
        let (store, label) = (self.store, self.label);
        let key = self.key("t/app_code=x/dt=2026-01-01/create/manifest.json");
        store
            .put(
                &Key::stored(key.clone()),
                Bytes::from_static(b"first"),
                PutMode::Create,
            )
            .await
            .unwrap_or_else(|e| panic!("{label}: put: {e}"));
        match store
            .put(
                &Key::stored(key.clone()),
                Bytes::from_static(b"other"),
                PutMode::Create,
            )
            .await
        {
            Err(StoreError::AlreadyExists { key: refused }) => assert_eq!(refused, key),
            other => panic!("{label}: create over an existing key must fail, got {other:?}"),
        }
        assert_eq!(
            read(store, &key).await,
            b"first",
            "{label}: a refused create changes nothing"
        );
    }

    async fn overwrite_replaces_an_object(&self) {
        let (store, label) = (self.store, self.label);
        let key = self.key("t/app_code=x/dt=2026-01-01/overwrite/data.ndjson.gz");
        for body in [&b"first"[..], b"replaced"] {
            store
                .put(
                    &Key::stored(key.clone()),
                    Bytes::from_static(body),
                    PutMode::Overwrite,
                )
                .await
                .unwrap_or_else(|e| panic!("{label}: overwrite: {e}"));
        }
        assert_eq!(read(store, &key).await, b"replaced", "{label}: overwrite");
        assert_eq!(
            store
                .head(&Key::stored(key.clone()))
                .await
                .unwrap()
                .unwrap()
                .size,
            8,
            "{label}"
        );
    }

    async fn list_is_sorted_and_by_prefix(&self) {
        let (store, label) = (self.store, self.label);
        let listed = [
            self.key("l/app_code=x/dt=2026-01-02/b2/_SUCCESS"),
            self.key("l/app_code=x/dt=2026-01-01/b1/data.ndjson.gz"),
        ];
        for key in listed
            .iter()
            .chain([&self.key("l2/other"), &self.key("m/other")])
        {
            store
                .put(
                    &Key::stored(key.clone()),
                    Bytes::from_static(b"{}\n"),
                    PutMode::Create,
                )
                .await
                .unwrap_or_else(|e| panic!("{label}: put {key}: {e}"));
        }
        assert_eq!(
            store
                .list(&self.store.location().prefix().folder("l"))
                .await
                .unwrap(),
            vec![listed[1].clone(), listed[0].clone()],
            "{label}: list is sorted and by prefix"
        );
        assert_eq!(
            outbox_archiver::get_all(store, &Key::stored(listed[0].clone()))
                .await
                .unwrap()
                .unwrap(),
            b"{}\n",
            "{label}: get_all"
        );
    }

    /// Deleting a key that is gone is not an error (a rerun of an interrupted cleanup).
    async fn delete_is_idempotent(&self) {
        let (store, label) = (self.store, self.label);
        let key = self.key("t/app_code=x/dt=2026-01-01/delete/_SUCCESS");
        store
            .put(
                &Key::stored(key.clone()),
                Bytes::from_static(b"{}\n"),
                PutMode::Create,
            )
            .await
            .unwrap();
        store.delete(&Key::stored(key.clone())).await.unwrap();
        assert_eq!(
            store.head(&Key::stored(key.clone())).await.unwrap(),
            None,
            "{label}: deleted"
        );
        store
            .delete(&Key::stored(key.clone()))
            .await
            .unwrap_or_else(|e| panic!("{label}: a second delete: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_directory_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(Location::Local {
        root: dir.path().to_path_buf(),
    });
    contract(&store, "file://").await;
    let missing = LocalStore::new(Location::Local {
        root: dir.path().join("nope"),
    });
    assert!(matches!(
        missing.confirm_access().await,
        Err(StoreError::NoSuchBucket { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_store_with_every_checksum_setting() {
    for checksum in [
        UploadChecksum::None,
        UploadChecksum::Md5,
        UploadChecksum::Sha256,
        UploadChecksum::Crc64nvme,
    ] {
        for conditional in [
            ConditionalPutSetting::Auto,
            ConditionalPutSetting::On,
            ConditionalPutSetting::Off,
        ] {
            let mut s3 = TestS3::new().await;
            s3.settings.upload_checksum = Some(checksum);
            s3.settings.conditional_put = Some(conditional);
            let store = s3.store().await;
            let probed = store
                .probe_conditional_put(&Key::stored(
                    "archive/_outbox_archiver/conditional-put-probe",
                ))
                .await
                .unwrap();
            if s3.server.is_some() {
                assert_eq!(
                    probed,
                    match conditional {
                        ConditionalPutSetting::Auto => ConditionalPut::Honoured,
                        ConditionalPutSetting::On => ConditionalPut::Trusted,
                        ConditionalPutSetting::Off => ConditionalPut::Off,
                    },
                    "s3s honours If-None-Match"
                );
            }
            contract(
                store.as_ref(),
                &format!("s3 {checksum:?} conditional={conditional:?}"),
            )
            .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_with_object_lock_takes_every_put_that_carries_a_checksum() {
    for checksum in [
        UploadChecksum::Md5,
        UploadChecksum::Sha256,
        UploadChecksum::Crc64nvme,
        UploadChecksum::None,
    ] {
        let mut moto = MotoS3::new(Bucket::LockedByDefault {
            compliance: false,
            days: 1,
        })
        .await;
        moto.settings.upload_checksum = Some(checksum);
        let store = moto.store().await;
        let label = format!("moto, Object Lock by default, {checksum:?}");
        let probed = store
            .probe_conditional_put(&Key::stored(
                "archive/_outbox_archiver/conditional-put-probe",
            ))
            .await;
        if checksum == UploadChecksum::None {
            // The probe always sends Content-MD5; a batch's puts with no checksum are refused,
            // and the error names the setting.
            assert_eq!(probed.unwrap(), ConditionalPut::Honoured);
            let refused = store
                .put(
                    &Key::stored("archive/t/x"),
                    Bytes::from_static(b"x"),
                    PutMode::Create,
                )
                .await;
            match refused {
                Err(e @ StoreError::ChecksumRequired { .. }) => {
                    assert!(e.to_string().contains("--s3-upload-checksum"), "{e}")
                }
                other => panic!("{label}: expected the put refused, got {other:?}"),
            }
            continue;
        }
        assert_eq!(probed.unwrap(), ConditionalPut::Honoured, "{label}");
        contract(store.as_ref(), &label).await;
    }
    for conditional in [ConditionalPutSetting::On, ConditionalPutSetting::Off] {
        let mut moto = MotoS3::new(Bucket::Plain).await;
        moto.settings.conditional_put = Some(conditional);
        let store = moto.store().await;
        contract(
            store.as_ref(),
            &format!("moto, plain bucket, {conditional:?}"),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_verifies_against_the_stores_own_checksum() {
    let db = TestDb::new().await;
    let mut s3 = TestS3::new().await;
    s3.settings.upload_checksum = Some(UploadChecksum::Crc64nvme);
    let store = s3.store().await;
    db.insert(&rows("a1", 30)).await;
    let summary = archive(
        &env(&db, store.clone(), T0 + DAY),
        &options(&db, &["a1"], T0 + DAY),
    )
    .await;
    assert!(summary.ok, "{}", summary.to_json());
    let data_key = &summary.apps[0].batch_list[0].data_object_key;
    let meta = store
        .head(&Key::stored(data_key.clone()))
        .await
        .unwrap()
        .unwrap();
    if s3.server.is_some() {
        assert!(
            meta.crc64nvme.is_some(),
            "s3s stores and reports the CRC-64/NVME sent with the upload"
        );
    }
}
